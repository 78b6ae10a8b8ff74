/**
 * A process that runs one transactional operation and stops at a point of its transaction, for
 * the parent to kill it there (`TransactionalKill.test.ts`).
 *
 * Arguments: the database URL, the records table, the orders table, the key, and the point:
 *
 * - `before-reserve`: BEGIN was sent; the reservation (which sets `lock_timeout`) is not;
 * - `after-first-statement`: the reservation and the user's first row are written, not the second;
 * - `before-commit`: the outcome is recorded; COMMIT is not sent;
 * - `after-commit`: COMMIT was applied; the answer has not reached the operation;
 * - `none`: runs to the end.
 *
 * At the point it prints `PAUSED <point>` and waits forever. The points in the driver's traffic are
 * found by wrapping `pg`'s `Client.query`: a test's own instrument, in the test's own process.
 */
import { PgIdempotencyTable, PgTransactional } from "@effect-idempotency/sql-pg"
import * as Children from "@effect-idempotency/test-support/Children"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as Pg from "pg"

const [url, tableName, orders, key, point] = process.argv.slice(2) as [string, string, string, string, string]

const pause = () => Children.pause(point)

type Callback = (error: unknown, result: unknown) => void
const query = Pg.Client.prototype.query as (this: Pg.Client, ...args: Array<unknown>) => unknown
Object.assign(Pg.Client.prototype, {
  query(this: Pg.Client, ...args: Array<unknown>) {
    const text = typeof args[0] === "string" ? args[0] : undefined
    if (point === "before-reserve" && text !== undefined && /_reserve"?\(/.test(text)) return void pause()
    if (point === "before-commit" && text === "COMMIT") return void pause()
    if (point === "after-commit" && text === "COMMIT" && typeof args[2] === "function") {
      return query.call(this, args[0], args[1], () => void pause())
    }
    if (typeof args[2] === "function") {
      const callback = args[2] as Callback
      return query.call(this, args[0], args[1], (error: unknown, result: unknown) => callback(error, result))
    }
    return query.apply(this, args)
  }
})

const table = Either.getOrThrow(PgIdempotencyTable.make({ table: tableName }))

const order = PgTransactional.make({
  ...Children.killOrder(orders, key, {
    between: point === "after-first-statement" ? Effect.promise(pause) : Effect.void
  }),
  table
})

Children.runMain(
  order.run({ key, payload: Children.killPayload }).pipe(
    Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 2 }))
  )
)
