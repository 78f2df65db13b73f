/**
 * The client-module guard (docs/security.md §8): the module `virtual:spotpatch/client` holds the session
 * token, and Vite's default CORS admits every localhost origin, so a page on another local port could
 * otherwise load it and read the token. Every `\0virtual:spotpatch/*` module is refused (403) to a request
 * that is cross-origin (`Origin` other than this server) or cross-site/same-site (`Sec-Fetch-Site`).
 *
 * Why the decision is not made on the request URL: Vite strips `base`, removes `?t=`/`?import`, decodes
 * percent-escapes, turns `__x00__` into `\0` and unwraps `/@id/` before it resolves a URL, so one module
 * has unboundedly many spellings. The guard therefore decides in two independent ways, either of which
 * refuses:
 *
 * 1. **On the module Vite resolves** (`spotpatchModuleOf`): the URL is rewritten by the same steps Vite's
 *    base and transform middlewares apply, and the result is looked up in Vite's own module graph and
 *    plugin container — the same calls `transformRequest` makes — so the id is the one Vite would load.
 * 2. **On the bytes** (`holdForeignResponse`): whatever path produced it (a spelling a future Vite maps
 *    differently, `.map`, `?raw`, a module that inlines it, a proxy), a response to a foreign request is
 *    held until it ends and refused if it carries the token in clear or in base64 (Vite appends the
 *    module's source, token included, as a base64 inline source map). This layer cannot be bypassed by
 *    any URL spelling, because it does not look at the URL at all.
 *
 * A same-origin page (no `Origin` or its own, `Sec-Fetch-Site: same-origin|none` or absent) is untouched.
 */

import type { IncomingMessage, ServerResponse } from "node:http";

import type { ViteDevServer } from "vite";

import { isSameOrigin, type AccessPolicy } from "./guard.js";

/** Resolved ids of SpotPatch's virtual modules (`\0` + `virtual:spotpatch/…`, Rollup's convention). */
export const SPOTPATCH_MODULE_PREFIX = "\0virtual:spotpatch/";

const REFUSAL = "SpotPatch's client module is served to this dev server's own pages only.";

type Next = (error?: unknown) => void;

/** True when the request comes from another origin or another site (then no SpotPatch module is served). */
export function isForeignRequest(req: IncomingMessage, policy: Pick<AccessPolicy, "scheme">): boolean {
  const origin = req.headers.origin;
  const site = req.headers["sec-fetch-site"];
  if (typeof origin === "string" && !isSameOrigin(origin, req.headers.host ?? "", policy.scheme)) return true;
  return site === "cross-site" || site === "same-site";
}

/**
 * The connect middleware, installed first (in `configureServer`, before Vite's own middlewares): it sees
 * every request before anything can serve a module. `token` is this dev-server instance's session token.
 */
export function clientModuleGuard(server: ViteDevServer, policy: Pick<AccessPolicy, "scheme">, token: string) {
  const forms = tokenForms(token);
  return (req: IncomingMessage, res: ServerResponse, next: Next): void => {
    if (!isForeignRequest(req, policy)) return next();
    holdForeignResponse(res, (body) => forms.some((form) => body.includes(form)));
    spotpatchModuleOf(server, req.url ?? "/").then(
      (id) => (id === undefined ? next() : refuse(res)),
      () => refuse(res), // cannot tell what Vite would serve: fail closed
    );
  };
}

/**
 * The `\0virtual:spotpatch/*` id Vite would load for `rawUrl`, or undefined when it is another module.
 * Every candidate Vite could act on is checked: the URL with `base` stripped (what the base middleware
 * passes on) and as sent (middleware mode passes unmatched URLs on unchanged), and for `*.map` the module
 * whose source map the transform middleware would send.
 */
export async function spotpatchModuleOf(server: ViteDevServer, rawUrl: string): Promise<string | undefined> {
  for (const url of candidateUrls(rawUrl, baseOf(server))) {
    const id = await resolvedId(server, url);
    if (isSpotpatchId(id)) return id;
    if (isSpotpatchId(url)) return url; // named outright, even if no plugin resolves it (yet)
  }
  return undefined;
}

/** Vite's `config.rawBase` (the dev base the base middleware strips), else `config.base`. */
function baseOf(server: ViteDevServer): string {
  const config = server.config as { rawBase?: string; base?: string };
  return config.rawBase ?? config.base ?? "/";
}

/**
 * The module URLs Vite's middlewares derive from `rawUrl`, each step as Vite 6–8 does it: strip `base`
 * (`stripBase`), drop `?t=<13 digits>`, `decodeURI`, first `__x00__` → `\0`, drop `?import`, unwrap
 * `/@id/` (again `__x00__` → `\0`); plus the module a `.map` request is answered from.
 */
export function candidateUrls(rawUrl: string, base: string): string[] {
  const sent = [rawUrl];
  if (base !== "/" && base !== "") {
    const devBase = base.endsWith("/") ? base : `${base}/`;
    if (rawUrl === base || cleanUrl(rawUrl) === base) sent.push("/");
    else if (rawUrl.startsWith(devBase)) sent.push(rawUrl.slice(devBase.length - 1));
  }
  const out = new Set<string>();
  for (const url of sent) {
    let decoded: string;
    try {
      decoded = decodeURI(removeTimestampQuery(url)).replace(NULL_BYTE_PLACEHOLDER, "\0");
    } catch {
      decoded = url; // Vite answers a malformed URI with next(); the raw form is still checked
    }
    const unwrapped = unwrapId(removeImportQuery(decoded));
    out.add(decoded);
    out.add(unwrapped);
    const withoutQuery = cleanUrl(unwrapped);
    if (withoutQuery.endsWith(".map")) out.add(unwrapped.replace(/\.map($|\?)/, "$1"));
  }
  return [...out];
}

/** The id Vite's module graph, else its plugin container, gives `url` (what `transformRequest` loads). */
async function resolvedId(server: ViteDevServer, url: string): Promise<string> {
  const environment = (server as { environments?: Record<string, unknown> }).environments?.client as
    | Pick<ViteDevServer, "moduleGraph" | "pluginContainer">
    | undefined;
  const graph = environment?.moduleGraph ?? server.moduleGraph;
  const container = environment?.pluginContainer ?? server.pluginContainer;
  const module = await graph.getModuleByUrl(url);
  if (module?.id) return module.id;
  const resolved = await container.resolveId(url, undefined);
  return resolved?.id ?? url;
}

function isSpotpatchId(id: string): boolean {
  return id.startsWith(SPOTPATCH_MODULE_PREFIX) || id.startsWith(SPOTPATCH_MODULE_PREFIX.slice(1));
}

const NULL_BYTE_PLACEHOLDER = "__x00__";
const timestampRE = /(\?|&)t=\d{13}(?:&|$)/;
const importQueryRE = /(\?|&)import=?(?:&|$)/;
const trailingSeparatorRE = /[?&]$/;

function removeTimestampQuery(url: string): string {
  return url.replace(timestampRE, "$1").replace(trailingSeparatorRE, "");
}

function removeImportQuery(url: string): string {
  return url.replace(importQueryRE, "$1").replace(trailingSeparatorRE, "");
}

function unwrapId(id: string): string {
  return id.startsWith("/@id/") ? id.slice("/@id/".length).replace(NULL_BYTE_PLACEHOLDER, "\0") : id;
}

function cleanUrl(url: string): string {
  return url.replace(/[?#].*$/, "");
}

/**
 * The byte strings that betray `token` in a response: the token itself, and its base64 encodings at each
 * of the three byte alignments, in both alphabets (an inline source map is base64 of JSON holding the
 * module's source). Each base64 form covers at least 39 of the token's 43 characters.
 */
export function tokenForms(token: string): string[] {
  const forms = new Set([token]);
  for (let skip = 0; skip < 3; skip += 1) {
    const bytes = Buffer.from(token.slice(skip), "latin1");
    const whole = bytes.subarray(0, bytes.length - (bytes.length % 3));
    forms.add(whole.toString("base64"));
    forms.add(whole.toString("base64url"));
  }
  return [...forms];
}

/**
 * Hold `res`'s status, headers and body until it ends; then send them unchanged, or the 403 refusal when
 * `refused(body)` says so. Only foreign requests are held (a dev server answers few of them), so the page's
 * own responses keep streaming.
 */
function holdForeignResponse(res: ServerResponse, refused: (body: string) => boolean): void {
  const chunks: Buffer[] = [];
  const original = { writeHead: res.writeHead, write: res.write, end: res.end };
  let head: unknown[] | undefined;
  const take = (chunk: unknown, encoding: unknown): void => {
    if (chunk === undefined || chunk === null || typeof chunk === "function") return;
    chunks.push(Buffer.isBuffer(chunk) ? chunk : typeof chunk === "string" ? Buffer.from(chunk, (typeof encoding === "string" ? encoding : "utf8") as BufferEncoding) : Buffer.from(chunk as Uint8Array));
  };
  res.writeHead = function (this: ServerResponse, ...args: unknown[]) {
    head = args;
    return this;
  };
  res.write = function (this: ServerResponse, chunk: unknown, encoding?: unknown, callback?: unknown) {
    take(chunk, encoding);
    const done = typeof encoding === "function" ? encoding : callback;
    if (typeof done === "function") queueMicrotask(() => (done as () => void)());
    return true;
  } as ServerResponse["write"];
  res.end = function (this: ServerResponse, chunk?: unknown, encoding?: unknown, callback?: unknown) {
    take(chunk, encoding);
    Object.assign(res, original);
    const done = [chunk, encoding, callback].find((a) => typeof a === "function") as (() => void) | undefined;
    const body = Buffer.concat(chunks);
    if (refused(body.toString("latin1"))) {
      refuse(res);
      if (done) queueMicrotask(done);
      return this;
    }
    if (head) (original.writeHead as (...a: unknown[]) => void).apply(res, head);
    return (original.end as (b: Buffer, cb?: () => void) => ServerResponse).call(res, body, done);
  } as ServerResponse["end"];
}

function refuse(res: ServerResponse): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  for (const name of res.getHeaderNames()) res.removeHeader(name);
  res.statusCode = 403;
  res.setHeader("Content-Type", "text/plain; charset=utf-8");
  res.setHeader("Cache-Control", "no-store");
  res.end(REFUSAL);
}
