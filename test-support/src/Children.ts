/**
 * TypeScript files of the tests run in processes of their own, from the packages' sources (`node
 * --conditions=source --import tsx`): a second client racing the first, a process killed with
 * SIGKILL at a point it announces.
 *
 * @example
 * const seen = yield* Children.runUntilMarker(CHILD, [url, key, "before-commit"])
 * // "PAUSED before-commit (SIGKILL)"
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { ChildProcessWithoutNullStreams, SpawnOptions } from "node:child_process"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"

const TSX = createRequire(import.meta.url).resolve("tsx")

/** The arguments of `node` that run `file` (TypeScript, from the packages' sources) with `args`. */
export const nodeArgs = (file: string, args: ReadonlyArray<string>): Array<string> => [
  "--conditions=source",
  "--import",
  TSX,
  file,
  ...args
]

/** Starts `file` in a process of its own, its stdin, stdout and stderr piped (unless `options` say otherwise). */
export const start = (
  file: string,
  args: ReadonlyArray<string>,
  options?: SpawnOptions
): ChildProcessWithoutNullStreams =>
  spawn(process.execPath, nodeArgs(file, args), { stdio: "pipe", ...options }) as ChildProcessWithoutNullStreams

/**
 * Runs `file` until it prints a line starting with `PAUSED` (or the line `DONE`), then kills it with
 * SIGKILL; yields that line and how the process ended (`PAUSED before-commit (SIGKILL)`). A process
 * that ends without the line fails, with what it wrote on stderr.
 */
export const runUntilMarker = (file: string, args: ReadonlyArray<string>): Effect.Effect<string, Error> =>
  Effect.async<string, Error>((resume) => {
    const child = start(file, args, { stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    let err = ""
    let seen: string | undefined
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      const line = out.split("\n").find((line) => line.startsWith("PAUSED") || line === "DONE")
      if (line !== undefined && seen === undefined) {
        seen = line
        child.kill("SIGKILL")
      }
    })
    child.stderr.on("data", (chunk: Buffer) => {
      err += chunk.toString()
    })
    child.on("exit", (_code, signal) => {
      if (seen === undefined) resume(Effect.fail(new Error(`the child ended without a marker: ${err}`)))
      else resume(Effect.succeed(`${seen} (${signal ?? "exited"})`))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

// in the child -------------------------------------------------------------------------------------

/** In a child: prints `PAUSED <point>` and never resolves; the process waits there until it is killed. */
export const pause = (point: string): Promise<never> => {
  fs.writeSync(1, `PAUSED ${point}\n`)
  return new Promise<never>(() => {})
}

/** In a child: runs its program, prints `DONE` if it succeeds (its failure on stderr if not), then exits 0. */
export const runMain = <A, E>(program: Effect.Effect<A, E>): void => {
  Effect.runFork(
    program.pipe(
      Effect.tap(() => Effect.sync(() => fs.writeSync(1, "DONE\n"))),
      Effect.tapErrorCause((cause) => Effect.sync(() => process.stderr.write(`${cause}\n`))),
      Effect.ensuring(Effect.sync(() => process.exit(0)))
    )
  )
}

// the transactional mode killed -------------------------------------------------------------------

/**
 * The order a transactional child runs and its parent retries, as the options of the mode's `make`
 * (without its table): two rows of `orders` (`id`, `key`, `sku`, `quantity`), `<key>-1` then
 * `<key>-2`; `between` runs between them (the child's `after-first-statement` pause), `started`
 * before them (the parent counts its executions).
 */
export const killOrder = (
  orders: string,
  key: string,
  hooks: { readonly started?: Effect.Effect<void>; readonly between?: Effect.Effect<void> } = {}
) => ({
  name: "tx-kill",
  payload: Schema.Struct({ sku: Schema.String }),
  success: Schema.Struct({ lines: Schema.Int }),
  execute: ({ sku }: { readonly sku: string }) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const insert = (id: string) => sql`INSERT INTO ${sql(orders)} ${sql.insert({ id, key, sku, quantity: 1 })}`
      yield* hooks.started ?? Effect.void
      yield* insert(`${key}-1`)
      yield* hooks.between ?? Effect.void
      yield* insert(`${key}-2`)
      return { lines: 2 }
    })
})

/** The payload of the order. */
export const killPayload = { sku: "A-1" }
