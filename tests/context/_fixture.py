"""A nested fixture project for the context tests: a root and a package with its own configs, secrets in
protected and in ordinary files, and components to sample."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import make_repo

CANARY_ENV = "sk-envcanary-0123456789abcdef"
CANARY_CONFIG = "cfgcanary-7f3a9b2c1d"
CHECK = {"id": "types", "name": "Types", "command": "npx", "args": ["tsc", "--noEmit", "-p", "tsconfig.app.json"]}

ROOT_PACKAGE = {
    "name": "mono", "private": True,
    "scripts": {"typecheck": "tsc --noEmit -p tsconfig.app.json", "lint": "eslint . --max-warnings 0"},
    "devDependencies": {"typescript": "~5.6.3", "prettier": "3.3.0", "lodash": "^4.17.21"},
}
APP_PACKAGE = {
    "name": "app", "scripts": {"check": "npx tsc --noEmit -p tsconfig.app.json"},
    "dependencies": {"react": "^18.3.1", "react-dom": "^18.3.1", "tailwindcss": "^3.4.0", "left-pad": "1.0.0"},
    "devDependencies": {"@types/react": "^18.3.12", "vite": "^6.0.0"},
}

FILES: dict[str, str] = {
    ".gitignore": "node_modules\nignored.md\n",
    ".editorconfig": "root = true\n[*]\nindent_style = space\nindent_size = 2\n",
    ".prettierrc": '{"semi": true, "singleQuote": false}\n',
    "AGENTS.md": "# Root agent notes\nUse tabs everywhere.\n",
    "package.json": json.dumps(ROOT_PACKAGE, indent=2) + "\n",
    "tsconfig.json": '{\n  // root options\n  "compilerOptions": {"strict": false, "outDir": "dist",},\n}\n',
    ".env": f"OPENAI_API_KEY={CANARY_ENV}\n",
    "package-lock.json": '{"lockfileVersion": 3, "name": "lockcanary"}\n',
    "packages/app/.editorconfig": "[*.tsx]\nmax_line_length = 100\n",
    "packages/app/.prettierrc.json": json.dumps({"semi": False, "singleQuote": True, "apiKey": CANARY_CONFIG}) + "\n",
    "packages/app/AGENTS.md": ("# App agent notes\nComponents are function components with named exports.\n"
                              "Before you finish, run npx tsc --noEmit -p tsconfig.app.json in this folder.\n"),
    "packages/app/package.json": json.dumps(APP_PACKAGE, indent=2) + "\n",
    "packages/app/tsconfig.json": '{"files": [], "references": [{"path": "./tsconfig.app.json"}]}\n',
    "packages/app/tsconfig.app.json": (
        '{\n  /* app */\n  "compilerOptions": {\n    "jsx": "react-jsx", // automatic runtime\n'
        '    "strict": true,\n    "baseUrl": ".",\n    "paths": {"@/*": ["src/*"]},\n'
        '    "outDir": "build",\n  },\n}\n'),
    "packages/app/.env.local": f"KEY={CANARY_ENV}\n",
    "packages/app/src/components/Button.tsx": "".join(f"// button line {i}\n" for i in range(1, 41)),
    "packages/app/src/components/Card.tsx": "export function Card() {\n  return <div className=\"card\" />;\n}\n",
    "packages/app/src/components/Badge.tsx": "export const Badge = () => <span className=\"badge\" />;\n",
    "packages/app/src/components/Card.test.tsx": "test('card', () => {});\n",
    "packages/app/src/components/helpers.ts": "export const helper = 1;\n",
    "packages/app/src/components/index.css": ".card { color: red; }\n",
    "packages/app/src/components/id_rsa.tsx": "PRIVATE KEY CANARY\n",
    "packages/app/src/components/.eslintrc.json": '{"rules": {"no-console": "error"}}\n',
}


def make_project(root: Path) -> Path:
    project = make_repo(root, FILES)
    (project / "ignored.md").write_text("ignored canary\n")
    return project
