// Function length of the widgets' front end (npm run check, make lint): no function in
// widgets/src longer than MAX_LINES lines, counted from its first to its last line (a
// function's nested functions count inside it too, as eslint's max-lines-per-function does).
// Function-like nodes and their spans come from the TypeScript compiler's parser (already a
// dev dependency): declarations, expressions, arrows, methods, accessors, constructors.
//
//   node scripts/fn_length.mjs            check src/*.js (exit 1 on a finding)
//   node scripts/fn_length.mjs --list N   print every function of N lines or more, longest first
//
// ALLOWED names the functions still over the limit, by "file:name", each with the length it
// had when listed: one that grows is a finding, and an entry whose function is back under
// the limit (or gone) is a finding too, so the list only shrinks. Remove an entry with the fix.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

export const MAX_LINES = 150;

/** Over-long functions not yet split, "file:name" -> lines when listed: none left (issue 40;
 * the last, the diff view's render, is state, pure drawing and wiring now). A new entry needs
 * a reason here. @type {Map<string, number>} */
export const ALLOWED = new Map();

/**
 * The name a function goes by: its own, else the variable, property or method it is
 * assigned to, else "<anonymous>" (an argument: a callback).
 * @param {ts.Node} node
 * @returns {string}
 */
function nameOf(node) {
  const own = /** @type {{name?: ts.Node}} */ (node).name;
  if (own && (ts.isIdentifier(own) || ts.isStringLiteral(own) || ts.isPrivateIdentifier(own))) return own.text;
  if (ts.isConstructorDeclaration(node)) return "constructor";
  const p = node.parent;
  if (p && (ts.isVariableDeclaration(p) || ts.isPropertyAssignment(p) || ts.isPropertyDeclaration(p)) && ts.isIdentifier(p.name))
    return p.name.text;
  if (p && ts.isBinaryExpression(p) && p.operatorToken.kind === ts.SyntaxKind.EqualsToken) return p.left.getText();
  return "<anonymous>";
}

/**
 * Every function-like node of a file with its first line and length in lines.
 * @param {string} file the file's name, as reported
 * @param {string} text its source
 * @returns {{file: string, name: string, line: number, lines: number}[]}
 */
export function functionsOf(file, text) {
  const src = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS);
  /** @type {{file: string, name: string, line: number, lines: number}[]} */
  const out = [];
  /** @param {ts.Node} node */
  const visit = (node) => {
    if (ts.isFunctionLike(node) && /** @type {{body?: ts.Node}} */ (node).body) {
      const first = src.getLineAndCharacterOfPosition(node.getStart(src)).line;
      const last = src.getLineAndCharacterOfPosition(node.getEnd()).line;
      out.push({ file, name: nameOf(node), line: first + 1, lines: last - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(src);
  return out;
}

/**
 * The findings over a set of functions: over-long ones not allowed, allowed ones that grew,
 * and allow-list entries that are no longer needed.
 * @param {{file: string, name: string, line: number, lines: number}[]} fns
 * @param {Map<string, number>} allowed
 * @param {number} max
 * @returns {string[]}
 */
export function findings(fns, allowed, max = MAX_LINES) {
  const out = [];
  const over = new Map();
  for (const f of fns) {
    if (f.lines <= max) continue;
    const key = `${f.file}:${f.name}`;
    over.set(key, Math.max(over.get(key) || 0, f.lines));
    const was = allowed.get(key);
    if (was === undefined)
      out.push(`${f.file}:${f.line}: function ${f.name} is ${f.lines} lines (at most ${max}): split it into state, drawing and wiring`);
    else if (f.lines > was)
      out.push(`${f.file}:${f.line}: function ${f.name} grew to ${f.lines} lines (allowed ${was} until split; at most ${max})`);
  }
  for (const key of allowed.keys())
    if (!over.has(key)) out.push(`${key}: no longer over ${max} lines: remove it from ALLOWED in widgets/scripts/fn_length.mjs`);
  return out;
}

/** Every function of the .js files in dir. @param {string} dir @returns {{file: string, name: string, line: number, lines: number}[]} */
export function scan(dir) {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith(".js"))
    .sort();
  return files.flatMap((f) => functionsOf(f, readFileSync(join(dir, f), "utf8")));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const src = join(dirname(fileURLToPath(import.meta.url)), "..", "src");
  const fns = scan(src);
  const at = process.argv.indexOf("--list");
  if (at >= 0) {
    const min = Number(process.argv[at + 1] || 60);
    for (const f of fns.filter((g) => g.lines >= min).sort((a, b) => b.lines - a.lines))
      console.log(`${String(f.lines).padStart(5)}  ${f.file}:${f.line} ${f.name}`);
  } else {
    const bad = findings(fns, ALLOWED);
    for (const line of bad) console.error(`widgets/src/${line}`);
    if (bad.length) process.exit(1);
  }
}
