// Vite's `?inline` CSS imports: the stylesheet's text (the overlay adopts it into its shadow root).
declare module "*.css?inline" {
  const css: string;
  export default css;
}
