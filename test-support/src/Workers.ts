/**
 * Workers for workerd (Miniflare): ES modules bundled with esbuild from the packages' sources (the
 * `source` condition; `node:*` is workerd's, with `nodejs_compat`), from files or from a README's
 * snippet, read as the consumer test reads it (`<!-- consumer-test: NAME -->` above a fenced block),
 * and served by a Miniflare disposed of with the scope.
 *
 * @example
 * const script = yield* Workers.bundleSource(Workers.readmeSnippet("packages/http/README.md", "workers"), dir)
 * const { miniflare } = yield* Workers.miniflare({ modules: true, script, compatibilityDate: "2026-04-01" })
 */
import * as Effect from "effect/Effect"
import type { BuildOptions, Plugin } from "esbuild"
import { build } from "esbuild"
import type { MiniflareOptions } from "miniflare"
import { Miniflare } from "miniflare"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

/** The repository's root. */
export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")

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

/** One ES module per entry point (a name and its file), by name; `plugins` resolve imports their own way. */
export const bundleFiles = (
  entryPoints: Readonly<Record<string, string>>,
  plugins?: ReadonlyArray<Plugin>
): Effect.Effect<Readonly<Record<string, string>>, unknown> =>
  Effect.map(
    Effect.tryPromise(() =>
      build({ ...options, entryPoints: { ...entryPoints }, outdir: "worker", plugins: [...(plugins ?? [])] })
    ),
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

/**
 * A Miniflare serving `options`, once it is ready (its URL: where it listens when `options` name a
 * port), disposed of when the scope closes.
 */
export const miniflare = (options: MiniflareOptions) =>
  Effect.gen(function*() {
    const miniflare = yield* Effect.acquireRelease(
      Effect.sync(() => new Miniflare(options)),
      (miniflare) => Effect.promise(() => miniflare.dispose())
    )
    const url = yield* Effect.tryPromise(() => miniflare.ready)
    return { miniflare, url }
  })

/** What a client got from a Worker: the status, the headers (lower-case names) and the body's text. */
export interface Answer {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

/** A Worker's response, read whole. */
export const answerOf = async (response: {
  readonly status: number
  readonly headers: Iterable<[string, string]>
  text(): Promise<string>
}): Promise<Answer> => ({
  status: response.status,
  headers: Object.fromEntries(response.headers),
  body: await response.text()
})

/** A query on a D1 database, and its rows. */
export type Query = (
  sql: string,
  ...params: ReadonlyArray<unknown>
) => Effect.Effect<ReadonlyArray<Readonly<Record<string, unknown>>>>

/** A D1 database's rows for a query, as the tests read them. */
export const d1Query = (db: {
  prepare(sql: string): {
    bind(...params: Array<unknown>): {
      all(): Promise<{ readonly results: ReadonlyArray<Readonly<Record<string, unknown>>> }>
    }
  }
}): Query =>
(sql, ...params) => Effect.map(Effect.promise(() => db.prepare(sql).bind(...params).all()), (result) => result.results)
