/**
 * What the examples' entry points share: embedded PostgreSQL (PGlite, PostgreSQL in WASM) served on
 * a loopback port by test-support's `PgliteServer`, so the `pg` driver talks to it as to any server,
 * and their command line read or their usage printed.
 */
import * as PgliteServer from "@effect-idempotency/test-support/PgliteServer"
import { PGlite } from "@electric-sql/pglite"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"

/** Embedded PostgreSQL on a free loopback port, stopped with the scope: its URL and its address. */
export const pglite: Effect.Effect<{ readonly url: string; readonly address: string }, never, Scope.Scope> = Effect
  .gen(function*() {
    const db = yield* Effect.acquireRelease(
      Effect.promise(() => PGlite.create()),
      (db) => Effect.promise(() => db.close())
    )
    return yield* PgliteServer.serve(db, { maxConnections: 8 })
  })

/** The process's arguments as `parse` reads them; on an error, its message and `usage` on stderr, and exit 2. */
export const argsOrExit = <Args>(parse: (argv: ReadonlyArray<string>) => Args, usage: string): Args => {
  try {
    return parse(process.argv.slice(2))
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${usage}\n`)
    process.exit(2)
  }
}
