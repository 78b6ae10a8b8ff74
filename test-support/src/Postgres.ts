/**
 * The PostgreSQL the tests, the examples' tests and the benchmark run against: the server
 * `TEST_PG_URL` names (CI sets it to the machine's server), else embedded PGlite (PostgreSQL in
 * WASM) served on a free loopback port by `PgliteServer`, so the `pg` driver talks to it as to any
 * server. Nothing of vitest's here: the benchmark imports this module outside a test run.
 *
 * @example
 * const database = yield* Postgres.pglite({ maxConnections: 8 })
 * // database.url: postgres://postgres@127.0.0.1:40123/postgres
 */
import { PGlite } from "@electric-sql/pglite"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as PgliteServer from "./PgliteServer.js"

/** A PostgreSQL server, by URL and by address. */
export interface Database {
  readonly kind: "server" | "pglite"
  readonly url: string
  readonly host: string
  readonly port: number
}

/** The database of a suite. */
export class TestDatabase extends Context.Tag("test/TestDatabase")<TestDatabase, Database>() {}

/** The server URL, when the environment names one (`TEST_PG_URL`). */
export const serverUrl: string | undefined = process.env.TEST_PG_URL === "" ? undefined : process.env.TEST_PG_URL

const fromUrl = (kind: Database["kind"], url: string): Database => {
  const parsed = new URL(url)
  return { kind, url, host: parsed.hostname, port: Number(parsed.port === "" ? 5432 : parsed.port) }
}

/**
 * Embedded PGlite, served on a free loopback port for the `pg` driver (`maxConnections` at once,
 * 100 unless given; PGlite is one session: one connection's query or transaction at a time, the
 * others wait), closed with the scope.
 */
export const pglite = (options?: { readonly maxConnections?: number | undefined }): Effect.Effect<
  Database,
  never,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const db = yield* Effect.acquireRelease(
      Effect.promise(() => PGlite.create()),
      (db) => Effect.promise(() => db.close())
    )
    const { url } = yield* PgliteServer.serve(db, { maxConnections: options?.maxConnections })
    return fromUrl("pglite", url)
  })

/** The server named by `url`. */
export const server = (url: string): Database => fromUrl("server", url)

/** The server `TEST_PG_URL` names, else PGlite (with `maxConnections`) for the life of the scope. */
export const primary = (options?: { readonly maxConnections?: number | undefined }): Effect.Effect<
  Database,
  never,
  Scope.Scope
> => serverUrl === undefined ? pglite(options) : Effect.succeed(server(serverUrl))

/** Embedded PGlite as the suite's database. */
export const layerPglite: Layer.Layer<TestDatabase> = Layer.scoped(TestDatabase, pglite())

/** The server named by `url` as the suite's database. */
export const layerServer = (url: string): Layer.Layer<TestDatabase> => Layer.succeed(TestDatabase, server(url))

/** The server when `TEST_PG_URL` is set, PGlite otherwise. */
export const layerPrimary: Layer.Layer<TestDatabase> = Layer.scoped(TestDatabase, primary())
