/**
 * Workers for workerd (Miniflare): ES modules bundled with esbuild from the packages' sources (the
 * `source` condition; `node:*` is workerd's, with `nodejs_compat`), from files or from a README's
 * snippet, read as the consumer test reads it (`<!-- consumer-test: NAME -->` above a fenced block).
 */
import * as Effect from "effect/Effect"
import type { BuildOptions } from "esbuild"
import { build } from "esbuild"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

/** The repository's root. */
export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..")

const options: BuildOptions = {
  bundle: true,
  write: false,
  format: "esm",
  platform: "neutral",
  target: "es2022",
  conditions: ["source"],
  mainFields: ["module", "main"],
  external: ["node:*"],
  logLevel: "silent"
}

/** One ES module per entry point (a name and its file), by name. */
export const bundleFiles = (
  entryPoints: Readonly<Record<string, string>>
): Effect.Effect<Readonly<Record<string, string>>, unknown> =>
  Effect.map(
    Effect.tryPromise(() => build({ ...options, entryPoints: { ...entryPoints }, outdir: "worker" })),
    (result) =>
      Object.fromEntries(
        Object.keys(entryPoints).map((name) => [
          name,
          result.outputFiles!.find((file) => path.basename(file.path) === `${name}.js`)!.text
        ])
      )
  )

/** An ES module from a TypeScript module's text, its imports resolved from `resolveDir`. */
export const bundleSource = (contents: string, resolveDir: string): Effect.Effect<string, unknown> =>
  Effect.map(
    Effect.tryPromise(() =>
      build({ ...options, stdin: { contents, resolveDir, loader: "ts", sourcefile: "snippet.ts" } })
    ),
    (result) => result.outputFiles![0]!.text
  )

/** The marker of a snippet, as `scripts/consumer-test.mjs` reads it. */
const marker = /<!-- consumer-test: ([\w-]+)(?: exports: [\w, ]+)? -->\n```\w+\n([\s\S]*?)\n```/g

/** The text of the snippet `name` of a README (a path from the root), as it is written there. */
export const readmeSnippet = (readme: string, name: string): string => {
  const text = fs.readFileSync(path.join(root, readme), "utf8")
  const found = [...text.matchAll(marker)].filter((match) => match[1] === name)
  if (found.length !== 1) throw new Error(`${readme} marks the snippet ${name} ${found.length} times`)
  return found[0]![2]!
}
