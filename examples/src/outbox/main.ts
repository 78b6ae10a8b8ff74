/**
 * `npx tsx --conditions=source examples/src/outbox/main.ts`: the outbox example on an embedded
 * PostgreSQL (PGlite), or on the database of `DATABASE_URL`.
 */
import { PgIdempotencyMigration } from "@effect-idempotency/sql-pg"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { pglite } from "../Launch.js"
import * as Outbox from "./Outbox.js"

const url = process.env.DATABASE_URL === "" ? undefined : process.env.DATABASE_URL

const program = Effect.gen(function*() {
  const database = url ?? (yield* pglite).url
  const result = yield* Effect.zipRight(PgIdempotencyMigration.migration(), Outbox.demo).pipe(
    Effect.provide(PgClient.layer({ url: Redacted.make(database), maxConnections: 4 }))
  )
  yield* Effect.log(result)
})

NodeRuntime.runMain(Effect.scoped(program))
