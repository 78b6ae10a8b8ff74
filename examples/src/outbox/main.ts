/**
 * `npx tsx --conditions=source examples/src/outbox/main.ts`: the outbox example on an embedded
 * PostgreSQL (PGlite), or on the database of `DATABASE_URL`.
 */
import { PgIdempotencyMigration } from "@effect-idempotency/sql-pg"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as PgClient from "@effect/sql-pg/PgClient"
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Outbox from "./Outbox.js"

/** Embedded PostgreSQL: PGlite, served on a free loopback port for the `pg` driver. */
const pglite = Effect.gen(function*() {
  const db = yield* Effect.acquireRelease(
    Effect.promise(() => PGlite.create()),
    (db) => Effect.promise(() => db.close())
  )
  const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 8 })
  yield* Effect.acquireRelease(Effect.promise(() => server.start()), () => Effect.promise(() => server.stop()))
  return `postgres://postgres@${server.getServerConn()}/postgres`
})

const url = process.env.DATABASE_URL === "" ? undefined : process.env.DATABASE_URL

const program = Effect.gen(function*() {
  const database = url ?? (yield* pglite)
  const result = yield* Effect.zipRight(PgIdempotencyMigration.migration(), Outbox.demo).pipe(
    Effect.provide(PgClient.layer({ url: Redacted.make(database), maxConnections: 4 }))
  )
  yield* Effect.log(result)
})

NodeRuntime.runMain(Effect.scoped(program))
