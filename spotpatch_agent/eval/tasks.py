"""The eval's fixed suite (issue 27 part 1): 9 tasks on each of three small apps the package ships.

The apps are the demo's React app (``demo/app``) and its Vue and Svelte twins (``eval/apps/vue``,
``eval/apps/svelte``): the same page (a header, a product card, a list) in each framework's own syntax.
An :class:`App` names its four source files and the syntax the tasks need; every task is built from one
:class:`App` by a small function, so the three variants of a task ask the same thing.

A task holds what the page would send (its targets: instruction, the element's tag, text and class, the
located ``file:line:column`` of its start tag — found in the app's source by an anchor string, never typed
by hand — and the component usage chain), what the judge checks (:class:`Expect` predicates on the result,
the files the diff may touch) and an oracle: the ``replace_text`` edits that do the task right (the tests
play them through the scripted provider; docs/eval.md).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

_PACKAGE = Path(__file__).resolve().parent.parent
#: The Vue and Svelte apps of the suite (the React app is the demo's).
APPS_DIR = Path(__file__).resolve().parent / "apps"


@dataclass(frozen=True)
class App:
    """One app of the suite: its folder, its files (project-relative) and the syntax tasks need."""

    name: str
    directory: Path
    app: str
    header: str
    card: str
    items: str
    #: The class attribute's name (``className`` in JSX, ``class`` in Vue and Svelte templates).
    cls: str
    #: The price as the card renders it, and the same with two decimals.
    price: str
    price_fixed: str
    #: The list item as it renders the item, and the same in upper case.
    item: str
    item_upper: str
    #: The ProductCard usage's price attribute in the App, the Sale badge markup, and its prop type line.
    price_attr: str
    badge: str
    #: npm packages the app's typecheck needs (pinned; installed once into the cache: demo/typecheck.py).
    packages: tuple[str, ...]
    tool: str

    def read(self, path: str) -> str:
        return (self.directory / path).read_text("utf-8")

    def locate(self, path: str, anchor: str) -> tuple[int, int]:
        """1-based ``(line, column)`` where ``anchor`` first occurs in ``path``; ``LookupError`` if nowhere."""
        for number, line in enumerate(self.read(path).splitlines(), start=1):
            at = line.find(anchor)
            if at >= 0:
                return number, at + 1
        raise LookupError(f"{self.name}: {anchor!r} is not in {path}")


REACT = App("react", _PACKAGE / "demo" / "app", "src/App.tsx", "src/components/Header.tsx",
            "src/components/ProductCard.tsx", "src/components/ItemList.tsx", "className",
            "${price}", "${price.toFixed(2)}", "<li key={item}>{item}</li>", "<li key={item}>{item.toUpperCase()}</li>",
            "price={19.5}", '{discounted && <span className="badge">Sale</span>}',
            ("typescript@5.9.3", "@types/react@18.3.32", "@types/react-dom@18.3.7"), "tsc")
VUE = App("vue", APPS_DIR / "vue", "src/App.vue", "src/components/Header.vue", "src/components/ProductCard.vue",
          "src/components/ItemList.vue", "class", "${{ price }}", "${{ price.toFixed(2) }}",
          '<li v-for="item in items" :key="item">{{ item }}</li>',
          '<li v-for="item in items" :key="item">{{ item.toUpperCase() }}</li>',
          ':price="19.5"', '<span v-if="discounted" class="badge">Sale</span>',
          ("typescript@5.9.3", "vue@3.5.47", "vue-tsc@3.3.14"), "vue-tsc")
SVELTE = App("svelte", APPS_DIR / "svelte", "src/App.svelte", "src/components/Header.svelte",
             "src/components/ProductCard.svelte", "src/components/ItemList.svelte", "class", "${price}",
             "${price.toFixed(2)}", "<li>{item}</li>", "<li>{item.toUpperCase()}</li>", "price={19.5}",
             '{#if discounted}<span class="badge">Sale</span>{/if}',
             ("typescript@5.9.3", "svelte@5.59.1", "svelte-check@4.7.8"), "svelte-check")
APPS: dict[str, App] = {a.name: a for a in (REACT, VUE, SVELTE)}


@dataclass(frozen=True)
class Edit:
    """One oracle ``replace_text``: ``old`` occurs exactly once in ``path``."""

    path: str
    old: str
    new: str


@dataclass(frozen=True)
class Expect:
    """A file predicate of the judge: ``path``'s text after the job ``contains`` / ``lacks`` the literal
    ``text``, or ``matches`` it as a regular expression (``re.search``). ``why`` names it in a failure."""

    path: str
    kind: Literal["contains", "lacks", "matches"]
    text: str
    why: str


@dataclass(frozen=True)
class Place:
    """A source location given by an anchor: where ``anchor`` first occurs in ``path``."""

    path: str
    anchor: str
    component: str | None = None


@dataclass(frozen=True)
class TargetSpec:
    """One picked element as the page sends it (protocol/annotation.py ``Target``). ``at`` is None for an
    element whose source the page could not locate (the model must search for it)."""

    instruction: str
    tag: str
    text: str
    cls: str | None
    selector: str
    at: Place | None
    chain: tuple[Place, ...] = ()


@dataclass(frozen=True)
class Task:
    """One eval task: ``id`` is ``<app>/<name>``; ``files`` the only files the diff may touch."""

    id: str
    app: App
    kind: str
    targets: tuple[TargetSpec, ...]
    expect: tuple[Expect, ...]
    files: frozenset[str]
    oracle: tuple[Edit, ...]
    #: The oracle first searches for this text (tasks whose target has no located source).
    search: str | None = None
    tags: tuple[str, ...] = field(default=())

    def annotation(self) -> dict[str, Any]:
        """The ``SpotAnnotation`` wire dict the page would send for this task (deterministic)."""
        targets = []
        for i, t in enumerate(self.targets, start=1):
            element: dict[str, Any] = {"tagName": t.tag, "selector": t.selector, "text": t.text}
            if t.cls is not None:
                element["attributes"] = {"class": t.cls}
            target: dict[str, Any] = {"index": i, "instruction": t.instruction, "element": element}
            if t.at is not None:
                line, column = self.app.locate(t.at.path, t.at.anchor)
                target["source"] = {"file": t.at.path, "line": line, "column": column}
            chain = []
            for site in t.chain:
                line, column = self.app.locate(site.path, site.anchor)
                chain.append({"component": site.component, "file": site.path, "line": line, "column": column})
            if chain:
                target["usageChain"] = chain
            targets.append(target)
        return {"annotationId": "eval-" + self.id.replace("/", "-"), "pageUrl": "/", "targets": targets}


def _cls(a: App, value: str) -> str:
    return f'{a.cls}="{value}"'


def _save(a: App) -> TargetSpec:
    return TargetSpec("Make the Save button the primary button (class `btn-primary`).", "button", "Save",
                      "btn btn-secondary", "main.container > section.card > button.btn", Place(a.card, "<button"))


def _price(a: App) -> TargetSpec:
    return TargetSpec("Show the price with two decimals.", "span", "$19.5", "price",
                      "main.container > section.card > span.price", Place(a.card, "<span"))


#: Class predicates accept any order and extra classes: ``class="btn-primary btn"`` is as right as the oracle's.
_PRIMARY = (r'="[^"]*\bbtn-primary\b[^"]*"[^>]*>\s*Save\s*<', "the Save button has the class btn-primary")
_FIXED = (r"toFixed\(\s*2\s*\)|minimumFractionDigits:\s*2", "the price is formatted with two decimals")


def _card_usage(a: App) -> Place:
    return Place(a.app, "<ProductCard", "ProductCard")


def save_primary(a: App) -> Task:
    return Task(f"{a.name}/save-primary", a, "class", (_save(a),),
                (Expect(a.card, "matches", *_PRIMARY),
                 Expect(a.card, "lacks", "btn-secondary", "btn-secondary is gone from the card")),
                frozenset({a.card}), (Edit(a.card, _cls(a, "btn btn-secondary"), _cls(a, "btn btn-primary")),))


def price_decimals(a: App) -> Task:
    return Task(f"{a.name}/price-decimals", a, "number-format", (_price(a),),
                (Expect(a.card, "matches", *_FIXED),), frozenset({a.card}), (Edit(a.card, a.price, a.price_fixed),))


def heading_text(a: App) -> Task:
    target = TargetSpec('Change the heading to "Corner Shop".', "h1", "SpotPatch demo shop", None,
                        "header.header > h1", Place(a.header, "<h1"), (Place(a.app, "<Header", "Header"),))
    return Task(f"{a.name}/heading-text", a, "text-usage-chain", (target,),
                (Expect(a.app, "matches", r"""title=\{?["'`]Corner Shop["'`]\}?""",
                        "the App passes the title Corner Shop"),
                 Expect(a.app, "lacks", "SpotPatch demo shop", "the old title is gone")),
                frozenset({a.app}), (Edit(a.app, 'title="SpotPatch demo shop"', 'title="Corner Shop"'),))


def notice_search(a: App) -> Task:
    target = TargetSpec('Change this message to "Added to your wishlist."', "p", "Saved to your list.", "notice",
                        "main.container > p.notice", None)
    return Task(f"{a.name}/notice-search", a, "text-search", (target,),
                (Expect(a.app, "contains", "Added to your wishlist.", "the notice says Added to your wishlist."),
                 Expect(a.app, "lacks", "Saved to your list.", "the old notice text is gone")),
                frozenset({a.app}), (Edit(a.app, "Saved to your list.", "Added to your wishlist."),),
                search="Saved to your list.")


def list_reorder(a: App) -> Task:
    target = TargetSpec('Show "Linen notebook" first, then the other items in their current order.', "ul",
                        "Canvas tote bag Enamel mug Linen notebook", "items", "main.container > ul.items",
                        Place(a.items, "<ul"), (Place(a.app, "<ItemList", "ItemList"),))
    order = '"Canvas tote bag", "Enamel mug", "Linen notebook"'
    return Task(f"{a.name}/list-reorder", a, "reorder", (target,),
                (Expect(a.app, "matches", r'"Linen notebook",\s*"Canvas tote bag",\s*"Enamel mug"',
                        "the items are Linen notebook, Canvas tote bag, Enamel mug"),),
                frozenset({a.app}), (Edit(a.app, order, '"Linen notebook", "Canvas tote bag", "Enamel mug"'),))


def add_element(a: App) -> Task:
    target = TargetSpec('Add a "Remove" button right after this button, with the classes `btn btn-secondary`.',
                        "button", "Save", "btn btn-secondary", "main.container > section.card > button.btn",
                        Place(a.card, "<button"))
    save = a.read(a.card).splitlines()[a.locate(a.card, "<button")[0] - 1]
    indent = save[: len(save) - len(save.lstrip())]
    return Task(f"{a.name}/add-element", a, "add-element", (target,),
                (Expect(a.card, "matches", r'<button[^>]*"btn btn-secondary"[^>]*>\s*Remove\s*</button>',
                        "a Remove button with the classes btn btn-secondary"),
                 Expect(a.card, "contains", ">Save</button>", "the Save button is still there")),
                frozenset({a.card}),
                (Edit(a.card, save, f'{save}\n{indent}<button {_cls(a, "btn btn-secondary")}>Remove</button>'),))


def prop_chain(a: App) -> Task:
    target = TargetSpec('Show a "Sale" badge (a span with the class `badge`) after the name when a new boolean '
                        "prop `discounted` is true, and pass `discounted` as true for this card.", "h2",
                        "Cotton T-shirt", None, "main.container > section.card > h2", Place(a.card, "<h2"),
                        (_card_usage(a),))
    h2 = a.read(a.card).splitlines()[a.locate(a.card, "<h2")[0] - 1]
    indent = h2[: len(h2) - len(h2.lstrip())]
    typed: tuple[Edit, ...]
    if a.name == "vue":
        typed = (Edit(a.card, "  price: number;\n", "  price: number;\n  discounted: boolean;\n"),)
        passed = Edit(a.app, a.price_attr, a.price_attr + ' :discounted="true"')
    else:
        typed = (Edit(a.card, "  price: number;\n", "  price: number;\n    discounted: boolean;\n"
                      if a.name == "svelte" else "  price: number;\n  discounted: boolean;\n"),
                 Edit(a.card, "{ name, price, onSave }", "{ name, price, onSave, discounted }"))
        passed = Edit(a.app, a.price_attr, a.price_attr + " discounted={true}")
    return Task(f"{a.name}/prop-chain", a, "prop-usage-chain", (target,),
                (Expect(a.card, "matches", r"discounted\s*\??:\s*boolean",
                        "the card declares a boolean prop discounted"),
                 Expect(a.card, "matches", r'="[^"]*\bbadge\b[^"]*"[^>]*>\s*Sale\s*<', "the card renders a Sale badge"),
                 Expect(a.app, "matches", r"<ProductCard[^>]*discounted", "the App passes discounted to the card")),
                frozenset({a.card, a.app}), (*typed, Edit(a.card, h2, f"{h2}\n{indent}{a.badge}"), passed))


def two_files(a: App) -> Task:
    striped = TargetSpec("Add the class `items-striped` to this list.", "ul",
                         "Canvas tote bag Enamel mug Linen notebook", "items", "main.container > ul.items",
                         Place(a.items, "<ul"), (Place(a.app, "<ItemList", "ItemList"),))
    return Task(f"{a.name}/two-files", a, "multi-target", (_save(a), striped),
                (Expect(a.card, "matches", *_PRIMARY),
                 Expect(a.items, "matches", rf'{a.cls}="[^"]*\bitems-striped\b',
                        "the list has the class items-striped")),
                frozenset({a.card, a.items}),
                (Edit(a.card, _cls(a, "btn btn-secondary"), _cls(a, "btn btn-primary")),
                 Edit(a.items, _cls(a, "items"), _cls(a, "items items-striped"))))


def three_files(a: App) -> Task:
    heading = TargetSpec("Give this heading the class `title-large`.", "h1", "SpotPatch demo shop", None,
                         "header.header > h1", Place(a.header, "<h1"), (Place(a.app, "<Header", "Header"),))
    upper = TargetSpec("Show each item in upper case (in the code, not with CSS).", "li", "Canvas tote bag", None,
                       "main.container > ul.items > li", Place(a.items, "<li"),
                       (Place(a.app, "<ItemList", "ItemList"),))
    return Task(f"{a.name}/three-files", a, "multi-target", (heading, _price(a), upper),
                (Expect(a.header, "matches", r"<h1[^>]*\btitle-large\b", "the heading has the class title-large"),
                 Expect(a.card, "matches", *_FIXED),
                 Expect(a.items, "contains", "toUpperCase()", "the items are shown in upper case")),
                frozenset({a.header, a.card, a.items}),
                (Edit(a.header, "<h1>", f"<h1 {_cls(a, 'title-large')}>"), Edit(a.card, a.price, a.price_fixed),
                 Edit(a.items, a.item, a.item_upper)))


_KINDS = (save_primary, price_decimals, heading_text, notice_search, list_reorder, add_element, prop_chain,
          two_files, three_files)


def all_tasks() -> list[Task]:
    """Every task of the suite, app by app, in a fixed order (27 tasks)."""
    return [make(app) for app in APPS.values() for make in _KINDS]


def select_tasks(pattern: str | None) -> list[Task]:
    """The tasks whose id matches the glob ``pattern`` (``vue/*``, ``*/prop-chain``; comma-separated globs
    are alternatives); every task when ``pattern`` is None."""
    tasks = all_tasks()
    if not pattern:
        return tasks
    globs = [p.strip() for p in pattern.split(",") if p.strip()]
    return [t for t in tasks if any(fnmatch.fnmatchcase(t.id, g) for g in globs)]
