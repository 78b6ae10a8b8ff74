/**
 * What the examples' entry points share: embedded PostgreSQL (PGlite, PostgreSQL in WASM) served on
 * a loopback port by pglite-socket, so the `pg` driver talks to it as to any server, and their
 * command line read or their usage printed.
 */
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"

/** Embedded PostgreSQL on a free loopback port, stopped with the scope: its URL and its address. */
export const pglite: Effect.Effect<{ readonly url: string; readonly address: string }, never, Scope.Scope> = Effect
  .gen(function*() {
    const db = yield* Effect.acquireRelease(
      Effect.promise(() => PGlite.create()),
      (db) => Effect.promise(() => db.close())
    )
    const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 8 })
    yield* Effect.acquireRelease(Effect.promise(() => server.start()), () => Effect.promise(() => server.stop()))
    const address = server.getServerConn()
    return { url: `postgres://postgres@${address}/postgres`, address }
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
