/**
 * A process that reserves keys in a SQLite database file that another process reserves at the
 * same time (`Race.test.ts`).
 *
 * Arguments: the file, the table, how many keys, and a name for this process's tokens. It waits
 * for a line on stdin (the start), reserves `key-0` … `key-(n-1)` in order, and prints one JSON line:
 * the keys it reserved.
 */
import { IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { SqlIdempotencyStore } from "@effect-idempotency/sql"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { once } from "node:events"

const [filename, table, count, name] = process.argv.slice(2) as [string, string, string, string]

const program = Effect.gen(function*() {
  const store = yield* IdempotencyStore.IdempotencyStore
  yield* Effect.promise(() => once(process.stdin, "data"))
  const reserved: Array<string> = []
  for (let i = 0; i < Number(count); i++) {
    const key = `key-${i}`
    const result = yield* store.reserve({
      id: IdempotencyRecord.makeRecordId({ operation: "race", key: IdempotencyKey.unsafeMake(key) }),
      token: `${name}-${i}`,
      fingerprint: "sha256:race",
      lease: Duration.minutes(5),
      ttl: Duration.hours(1),
      takeover: true
    })
    if (result._tag === "Reserved") reserved.push(key)
  }
  process.stdout.write(JSON.stringify(reserved) + "\n")
})

Effect.runPromise(
  Effect.provide(
    program,
    Layer.effect(IdempotencyStore.IdempotencyStore, SqlIdempotencyStore.make({ table })).pipe(
      Layer.provide(SqliteClient.layer({ filename }))
    )
  )
).then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(String(error) + "\n")
    process.exit(1)
  }
)
