export const x = 1;
export const y = 2;
