/**
 * Interrupted store calls on a small pool. `@effect/sql-pg` cancels the statement of an interrupted
 * fiber with `pg_cancel_backend`, sent on another pooled connection, and puts the connection back in
 * the pool as soon as that cancel returns: the next caller could get a connection whose statement
 * was still running, and the cancel signal could reach the backend after it had started the next
 * caller's statement, which then failed with SQLSTATE 57014 (`StoreUnavailable`) though nobody
 * interrupted it. The store never lets a statement be interrupted; these tests hold it to that.
 *
 * Writes to the table are slowed down (a trigger sleeps 1–3 ms) so that interruptions land while
 * statements are in flight. On the PostgreSQL server when `TEST_PG_URL` is set, else on PGlite.
 */
import { IdempotencyRecord } from "@effect-idempotency/core"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, layer } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Random from "effect/Random"
import { freshId, reserveRequest } from "./utils/fixtures.js"
import { awaitPoolIdle, layerSetUp, poolStore, resetTable, runApplication, runTable } from "./utils/TestDatabase.js"

const TABLE = runTable("idem_interruption")

/** Every write to the table takes 1–3 ms. */
const slowWrites = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`CREATE OR REPLACE FUNCTION "${TABLE}_slow"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_sleep(0.001 + random() * 0.002);
  RETURN NEW;
END
$$`).withoutTransform
  yield* sql.unsafe(`CREATE TRIGGER "${TABLE}_slow" BEFORE INSERT OR UPDATE ON "${TABLE}"
FOR EACH ROW EXECUTE FUNCTION "${TABLE}_slow"()`).withoutTransform
})

const Live = layerSetUp(Effect.zipRight(resetTable({ table: TABLE }), slowWrites))

/** The SQLSTATE under a store failure (`StoreUnavailable` > `SqlError` > the `pg` error). */
const sqlStateOf = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.squash(cause) as { readonly cause?: { readonly cause?: { readonly code?: unknown } } }
  return String(failure?.cause?.cause?.code ?? "none")
}

layer(Live, { excludeTestServices: true, timeout: "2 minutes" })("PgIdempotencyStore interruption", (it) => {
  it.scoped("a storm of interrupted calls on a pool of 4 never fails a call that nobody interrupted", () =>
    Effect.gen(function*() {
      const { counters, pool, store } = yield* poolStore({
        applicationName: runApplication("idem-interruption"),
        max: 4,
        store: { table: TABLE }
      })
      const workers = 12
      const callsPerWorker = 40
      const failures: Array<string> = []
      let interrupted = 0
      let uninterrupted = 0
      let slowestInterruption = 0

      // a reservation of a new key, of a key in progress (a conflict), a read, or a first execution
      const call = (id: IdempotencyRecord.RecordId): Effect.Effect<unknown, unknown> =>
        Effect.flatMap(Random.nextIntBetween(0, 4), (n): Effect.Effect<unknown, unknown> => {
          switch (n) {
            case 0:
              return store.reserve(reserveRequest(id))
            case 1:
              return store.get(id)
            case 2:
              return store.reserve(reserveRequest(freshId("interruption")))
            default: {
              const request = reserveRequest(freshId("interruption"))
              return Effect.zipRight(
                store.reserve(request),
                store.complete({
                  id: request.id,
                  token: request.token,
                  outcome: IdempotencyRecord.StoredOutcome.Success({ value: "1" }),
                  ttl: Duration.hours(1)
                })
              )
            }
          }
        })

      const worker = Effect.gen(function*() {
        const id = freshId("interruption")
        yield* store.reserve(reserveRequest(id))
        for (let i = 0; i < callsPerWorker; i++) {
          if (yield* Random.nextBoolean) {
            const fiber = yield* Effect.fork(call(id))
            yield* Effect.sleep(Duration.micros(BigInt(yield* Random.nextIntBetween(0, 5000))))
            const start = performance.now()
            const exit = yield* Fiber.interrupt(fiber)
            slowestInterruption = Math.max(slowestInterruption, performance.now() - start)
            if (Exit.isInterrupted(exit)) interrupted++
          } else {
            const exit = yield* Effect.exit(call(id))
            uninterrupted++
            if (Exit.isFailure(exit)) failures.push(`${sqlStateOf(exit.cause)}: ${Cause.pretty(exit.cause)}`)
          }
        }
      })

      yield* Effect.all(Array.from({ length: workers }, () => worker), { concurrency: "unbounded", discard: true })
      yield* Effect.logInfo(
        `${uninterrupted} calls not interrupted, ${failures.length} failed ` +
          `(SQLSTATE ${
            failures.map((failure) => failure.split(":")[0]).join(", ") || "-"
          }); ${interrupted} interrupted; ` +
          `${counters.cancels} cancels; ${counters.busyCheckouts} connections handed out busy; ` +
          `slowest interruption ${slowestInterruption.toFixed(1)} ms`
      )
      assert.isAbove(interrupted, 0)
      assert.deepStrictEqual(failures, [])
      assert.strictEqual(counters.busyCheckouts, 0, "a connection was handed out with a statement in flight")
      assert.strictEqual(counters.cancels, 0, "a statement was cancelled")
      assert.isBelow(slowestInterruption, 5_000)
      // the statements of the interrupted calls finish in the background, and their connections return
      yield* awaitPoolIdle(pool)
      assert.strictEqual(pool.idleCount, pool.totalCount)
    }))
})
