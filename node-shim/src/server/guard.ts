/**
 * Who may call `/__spotpatch/` (docs/design.md §15, docs/security.md §8): same origin only, an allowed
 * `Host`, the per-start session token in a custom header, a JSON body, and a dev server that is not
 * reachable from other machines unless the user opted in.
 *
 * Pure functions over headers and Vite's resolved `server` options, so they are unit-tested directly.
 */

import { timingSafeEqual } from "node:crypto";
import { isIP } from "node:net";

import { isArray } from "../protocol/arrays.js";
import { TOKEN_HEADER, type ServerErrorCode } from "../protocol/client.js";

/** The parts of Vite's resolved `server` options the policy reads. */
export interface ServerAccessConfig {
  host?: string | boolean | undefined;
  allowedHosts?: true | readonly string[] | undefined;
  cors?: unknown;
  https?: unknown;
  origin?: string | undefined;
}

export interface AccessPolicy {
  /** Why the dev server is reachable from other machines, or null when it is loopback-only. */
  exposure: string | null;
  /** `spotpatch({ allowRemoteAccess: true })`. */
  allowRemoteAccess: boolean;
  /** Host names (besides IPs, `localhost` and `*.localhost`) accepted in `Host`; `.x` also allows subdomains. */
  allowedHosts: readonly string[];
  /** The page's scheme. */
  scheme: "http" | "https";
}

export interface Refusal {
  status: number;
  code: ServerErrorCode;
  message: string;
}

export function accessPolicy(server: ServerAccessConfig, allowRemoteAccess: boolean): AccessPolicy {
  const hosts = isArray(server.allowedHosts) ? [...server.allowedHosts] : [];
  if (typeof server.host === "string" && server.host) hosts.push(server.host);
  if (server.origin) {
    try {
      hosts.push(new URL(server.origin).hostname);
    } catch {
      /* not a URL: Vite ignores it too */
    }
  }
  return {
    exposure: exposureOf(server),
    allowRemoteAccess,
    allowedHosts: hosts,
    scheme: server.https ? "https" : "http",
  };
}

/** Why this dev server is reachable from other machines or sites, or null when it is not. */
export function exposureOf(server: ServerAccessConfig): string | null {
  if (!isLoopbackHost(server.host)) {
    return `server.host is ${JSON.stringify(server.host)} (listening beyond this machine)`;
  }
  if (server.allowedHosts === true) return "server.allowedHosts is true (any Host header is accepted)";
  const remote = (isArray(server.allowedHosts) ? server.allowedHosts : []).filter((h) => !isLoopbackName(h));
  if (remote.length > 0) {
    // A proxy or tunnel name (ngrok, cloudflared, a LAN name): the page can be opened from elsewhere.
    return `server.allowedHosts lets other names reach this server (${remote.slice(0, 3).join(", ")})`;
  }
  if (server.origin) {
    try {
      if (!isLoopbackName(new URL(server.origin).hostname)) return "server.origin is not a loopback address";
    } catch {
      /* not a URL: Vite ignores it too */
    }
  }
  const cors = server.cors;
  const origin = typeof cors === "object" && cors !== null ? (cors as { origin?: unknown }).origin : undefined;
  if (cors === true || origin === true || origin === "*") return "server.cors allows every origin";
  if (origin !== undefined && !isDefaultCorsOrigin(origin)) return "server.cors allows other origins";
  return null;
}

function isLoopbackName(name: string): boolean {
  const host = name.trim().toLowerCase().replace(/^\.+/, "").replace(/^\[(.*)\]$/, "$1");
  return host === "localhost" || host.endsWith(".localhost") || host === "::1" || (isIP(host) === 4 && host.startsWith("127."));
}

/** Vite's default `cors.origin` is a RegExp admitting only loopback origins; anything else widens it. */
function isDefaultCorsOrigin(origin: unknown): boolean {
  if (origin instanceof RegExp) {
    return !["http://evil.example", "https://evil.example", "http://192.168.1.2"].some((o) => origin.test(o));
  }
  return false;
}

/** `server.host` values that bind loopback only (Vite's default `undefined` means `localhost`). */
export function isLoopbackHost(host: string | boolean | undefined): boolean {
  if (host === undefined || host === false) return true;
  if (host === true) return false;
  const name = host.trim().toLowerCase().replace(/^\[(.*)\]$/, "$1");
  if (name === "localhost" || name.endsWith(".localhost") || name === "::1") return true;
  return isIP(name) === 4 && name.startsWith("127.");
}

/**
 * Vite's own Host rule (host-validation-middleware): IP literals, `localhost`, `*.localhost`, and the
 * allowed host names. A missing `Host` is refused here (browsers always send it).
 */
export function isHostAllowed(hostHeader: string | undefined, allowedHosts: readonly string[]): boolean {
  if (!hostHeader) return false;
  const host = hostHeader.trim().toLowerCase();
  if (host.startsWith("[")) {
    const end = host.indexOf("]");
    return end > 0 && isIP(host.slice(1, end)) === 6 && /^(:\d{1,5})?$/.test(host.slice(end + 1));
  }
  const match = /^([a-z0-9._-]+)(:\d{1,5})?$/.exec(host);  // refuses "/", "?", "#", "\\", spaces
  if (!match) return false;
  const name = match[1]!;
  if (isIP(name) === 4 || name === "localhost" || name.endsWith(".localhost")) return true;
  return allowedHosts.some((allowed) => {
    const pattern = allowed.toLowerCase();
    return pattern === name || (pattern.startsWith(".") && (pattern.slice(1) === name || name.endsWith(pattern)));
  });
}

/** Whether `origin` is exactly `<scheme>://<Host>` (the dev server's own origin as the page sees it). */
export function isSameOrigin(origin: string, hostHeader: string, scheme: "http" | "https"): boolean {
  try {
    const page = new URL(origin);
    const self = new URL(`${scheme}://${hostHeader}`);
    return page.origin === self.origin && page.origin !== "null";
  } catch {
    return false;
  }
}

export function tokenMatches(given: string | undefined, token: string): boolean {
  if (typeof given !== "string") return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

type Headers = Record<string, string | string[] | undefined>;

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name.toLowerCase()];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * The first reason to refuse a request, in this order: exposure (unless opted in), Host, Origin,
 * `Sec-Fetch-Site`, HTTP method, token, `Content-Type`. Null when the request may proceed.
 */
export function refusalOf(method: string | undefined, headers: Headers, policy: AccessPolicy, token: string): Refusal | null {
  if (policy.exposure && !policy.allowRemoteAccess) {
    return {
      status: 403,
      code: "REMOTE_ACCESS_DISABLED",
      message:
        `SpotPatch is off because this dev server is reachable from other machines or sites: ${policy.exposure}. ` +
        "Anyone who can load the page could start jobs that edit your files. Serve on localhost, or opt in " +
        "with spotpatch({ allowRemoteAccess: true }) if you trust every client of this server.",
    };
  }
  const host = header(headers, "host");
  if (!isHostAllowed(host, policy.allowedHosts)) {
    return {
      status: 403,
      code: "FORBIDDEN_HOST",
      message: "SpotPatch refused the request: its Host header is not this dev server's (add the host to server.allowedHosts).",
    };
  }
  const origin = header(headers, "origin");
  if (origin !== undefined && !isSameOrigin(origin, host!, policy.scheme)) {
    return {
      status: 403,
      code: "FORBIDDEN_ORIGIN",
      message: "SpotPatch refused the request: it came from another origin; only the dev server's own pages may call it.",
    };
  }
  const site = header(headers, "sec-fetch-site");
  if (site !== undefined && site !== "same-origin" && site !== "none") {
    return {
      status: 403,
      code: "FORBIDDEN_ORIGIN",
      message: `SpotPatch refused the request: Sec-Fetch-Site is ${JSON.stringify(site)}; only same-origin requests are served.`,
    };
  }
  if (method !== "POST") {
    return { status: 405, code: "METHOD_NOT_ALLOWED", message: "SpotPatch endpoints accept POST only." };
  }
  if (!tokenMatches(header(headers, TOKEN_HEADER), token)) {
    return {
      status: 401,
      code: "BAD_TOKEN",
      message:
        `SpotPatch refused the request: the ${TOKEN_HEADER} header is missing or wrong. Calls must come from the ` +
        "SpotPatch client module of this dev-server start (reload the page after a restart).",
    };
  }
  const type = (header(headers, "content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (type !== "application/json") {
    return {
      status: 415,
      code: "UNSUPPORTED_MEDIA_TYPE",
      message: "SpotPatch refused the request: the body must be sent with Content-Type: application/json.",
    };
  }
  return null;
}
