/**
 * `Array.isArray` that keeps a readonly array's element type: it narrows `true | readonly string[]` to
 * `readonly string[]`, where the built-in narrows a readonly array to `any[]` and loses the element type.
 * Shared by the plugin (untrusted config values) and the overlay (values read back from sessionStorage).
 */
export const isArray: (value: unknown) => value is readonly unknown[] = Array.isArray;
