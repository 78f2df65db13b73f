export const old = true;
