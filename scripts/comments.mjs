/* global console, process */
/**
 * How much of each package's source is comments, and how much of that is prose: the house's comment
 * diet, measured. A report, not a gate: it prints a table and exits 0.
 *
 * - comment lines: lines inside a block comment, or starting with `//`;
 * - prose: comment lines that are not a tag (`@since`, `@category`…), a delimiter (`/**`, `*\/`, a
 *   bare `*`), or a line of a fenced example in a JSDoc comment.
 *
 * `node scripts/comments.mjs` (or `npm run comments`); `--json` prints the figures as JSON.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
/** The targets of the diet, in percent of all lines of a package's `src`. */
const TARGETS = { comments: 25, prose: 5 }

const files = (dir) =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name)
    return entry.isDirectory() ? files(full) : entry.name.endsWith(".ts") ? [full] : []
  })

const measure = (text) => {
  let total = 0
  let comments = 0
  let prose = 0
  let inBlock = false
  let inExample = false
  for (const raw of text.split("\n")) {
    const line = raw.trim()
    if (line === "") continue
    total++
    if (!inBlock && line.startsWith("//")) {
      comments++
      prose++
      continue
    }
    if (!inBlock && line.startsWith("/*")) inBlock = true
    if (!inBlock) continue
    comments++
    const body = line.replace(/^\/\*\*?/, "").replace(/\*\/$/, "").replace(/^\*/, "").trim()
    if (body.startsWith("```")) inExample = !inExample
    else if (!inExample && body !== "" && !body.startsWith("@")) prose++
    if (line.endsWith("*/")) {
      inBlock = false
      inExample = false
    }
  }
  return { total, comments, prose }
}

const rows = fs.readdirSync(path.join(root, "packages")).sort().flatMap((name) => {
  const src = path.join(root, "packages", name, "src")
  if (!fs.existsSync(src)) return []
  const sum = { total: 0, comments: 0, prose: 0 }
  for (const file of files(src)) {
    const m = measure(fs.readFileSync(file, "utf8"))
    sum.total += m.total
    sum.comments += m.comments
    sum.prose += m.prose
  }
  const percent = (n) => Math.round((1000 * n) / Math.max(1, sum.total)) / 10
  return [{ name, lines: sum.total, comments: percent(sum.comments), prose: percent(sum.prose) }]
})

if (process.argv.includes("--json")) {
  console.log(JSON.stringify({ targets: TARGETS, packages: rows }, null, 2))
} else {
  const mark = (value, target) => (value <= target ? `${value}%` : `${value}% (over ${target}%)`)
  console.log("| package | lines | comment lines | prose |")
  console.log("| --- | ---: | ---: | ---: |")
  for (const row of rows) {
    console.log(
      `| ${row.name} | ${row.lines} | ${mark(row.comments, TARGETS.comments)} | ${mark(row.prose, TARGETS.prose)} |`
    )
  }
}
