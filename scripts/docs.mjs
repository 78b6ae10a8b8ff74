#!/usr/bin/env node
/* global console, process */
/**
 * The API reference: `@effect/docgen` over each published package's JSDoc, which also type-checks
 * every `@example` (with the options of the package's `docgen.json`: strict,
 * exactOptionalPropertyTypes, the packages' sources through the `source` condition). The modules'
 * pages are gathered under `docs/<package>/`, with an index at `docs/README.md`.
 *
 * docgen also runs each example with tsx, except the testing kit's, which are vitest test files
 * (type-checked only).
 *
 * `node scripts/docs.mjs` regenerates `docs/`; `--check` only type-checks the examples (docgen's
 * output is written to a temporary folder inside each package and removed).
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { published } from "./published.mjs"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const check = process.argv.includes("--check")
const docgen = path.join(root, "node_modules", "@effect", "docgen", "bin.cjs")

/** A folder holding a `tsx` that runs nothing: for examples that only a test runner can run. */
const typeCheckOnlyBin = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "docgen-bin-"))
  fs.writeFileSync(path.join(dir, "tsx"), "#!/bin/sh\necho \"examples type-checked, not run (vitest test files)\"\n", {
    mode: 0o755
  })
  process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

const index = [
  "# API reference",
  "",
  "Generated from the JSDoc of each package by `@effect/docgen` (`npm run docs`); every example on these",
  "pages is type-checked in CI (`npm run docs:check`).",
  ""
]
if (!check) fs.rmSync(path.join(root, "docs"), { recursive: true, force: true })

for (const name of published) {
  const dir = path.join(root, "packages", name)
  const generated = path.join(dir, "docs")
  fs.rmSync(generated, { recursive: true, force: true })
  const started = Date.now()
  // docgen runs `tsc` and `tsx` (the workspace's) from the PATH: `tsc` type-checks the examples, `tsx`
  // runs them. The testing kit's examples are vitest test files, which run only inside vitest: for
  // that package a stand-in `tsx` comes first on the PATH, so its examples are type-checked, not run.
  const bins = [path.join(root, "node_modules", ".bin")]
  if (name === "testing") bins.unshift(typeCheckOnlyBin())
  const env = { ...process.env, PATH: [...bins, process.env.PATH].join(path.delimiter) }
  const result = spawnSync(process.execPath, [docgen], { cwd: dir, env, encoding: "utf8", timeout: 300_000 })
  const output = `${result.stdout ?? ""}${result.stderr ?? ""}`
  if (result.status !== 0) {
    fs.rmSync(generated, { recursive: true, force: true })
    console.error(output)
    console.error(`docs: @effect-idempotency/${name}: docgen failed (${result.error?.message ?? result.status})`)
    process.exit(1)
  }
  const examples = /(\d+) example\(s\) found/.exec(output)?.[1] ?? "0"
  console.log(`docs: @effect-idempotency/${name}: ${examples} examples type-checked (${Date.now() - started} ms)`)
  if (check) {
    fs.rmSync(generated, { recursive: true, force: true })
    continue
  }
  const target = path.join(root, "docs", name)
  fs.mkdirSync(target, { recursive: true })
  const modules = fs.readdirSync(path.join(generated, "modules"))
    .filter((file) => file.endsWith(".ts.md") && file !== "index.ts.md")
    .sort()
  for (const file of modules) {
    fs.copyFileSync(path.join(generated, "modules", file), path.join(target, file.replace(/\.ts\.md$/, ".md")))
  }
  fs.rmSync(generated, { recursive: true, force: true })
  index.push(
    `- \`@effect-idempotency/${name}\`: ${
      modules.map((file) => {
        const module = file.replace(/\.ts\.md$/, "")
        return `[${module}](${name}/${module}.md)`
      }).join(", ")
    }`
  )
}
if (!check) fs.writeFileSync(path.join(root, "docs", "README.md"), index.join("\n") + "\n")
