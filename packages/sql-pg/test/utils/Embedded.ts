/**
 * The PostgreSQL servers the tests and the benchmark run against, without anything of vitest's
 * (the benchmark imports this module outside a test run).
 */
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

export interface Database {
  readonly kind: "server" | "pglite"
  readonly url: string
  readonly host: string
  readonly port: number
}

export class TestDatabase extends Context.Tag("test/TestDatabase")<TestDatabase, Database>() {}

const fromUrl = (kind: Database["kind"], url: string): Database => {
  const parsed = new URL(url)
  return { kind, url, host: parsed.hostname, port: Number(parsed.port === "" ? 5432 : parsed.port) }
}

/** Embedded PGlite (PostgreSQL in WASM), served on a loopback port for the `pg` driver. */
export const layerPglite: Layer.Layer<TestDatabase> = Layer.scoped(
  TestDatabase,
  Effect.gen(function*() {
    const db = yield* Effect.acquireRelease(
      Effect.promise(() => PGlite.create()),
      (db) => Effect.promise(() => db.close())
    )
    const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 100 })
    yield* Effect.acquireRelease(Effect.promise(() => server.start()), () => Effect.promise(() => server.stop()))
    return fromUrl("pglite", `postgres://postgres@${server.getServerConn()}/postgres`)
  })
)

/** The server named by `TEST_PG_URL`. */
export const layerServer = (url: string): Layer.Layer<TestDatabase> =>
  Layer.succeed(TestDatabase, fromUrl("server", url))
