// Modules esbuild loads that are not JavaScript (build.mjs: loader ".css": "text").

/** A stylesheet imported as its text (uPlot's, injected by _charts.js). */
declare module "*.css" {
  const text: string;
  export default text;
}
