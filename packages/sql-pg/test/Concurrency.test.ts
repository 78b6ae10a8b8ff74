/**
 * Races on one key through a pool of 20 connections, with the database's clock: on the PostgreSQL
 * server when `TEST_PG_URL` is set (PGlite serializes statements, so there the races are weaker).
 *
 * On the server, the interleavings in which a READ COMMITTED reservation meets a concurrent write
 * are also forced one by one, with a second connection holding the row lock: the reservation's
 * INSERT waits for a concurrent insert, takeover or release, or its UPDATE waits for a concurrent
 * takeover or release of a record it read as one it may take over. Each ends with one owner and
 * the current record returned, never a stale or an empty answer.
 */
import { Idempotency, IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { PgIdempotencyStore } from "@effect-idempotency/sql-pg"
import * as Counting from "@effect-idempotency/test-support/Counting"
import * as StoreRaces from "@effect-idempotency/test-support/StoreRaces"
import { assert, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import { randomUUID } from "node:crypto"
import {
  DB_NOW,
  expectExisting,
  expectReserved,
  FP_A,
  freshId,
  rawClient,
  rawQuery,
  reserveRequest
} from "./utils/fixtures.js"
import {
  awaitLockWaits,
  layerClient,
  layerPrimary,
  resetTable,
  runApplication,
  runTable,
  serverUrl,
  TestDatabase
} from "./utils/TestDatabase.js"

const TABLE = runTable("idem_concurrency")
const APPLICATION = runApplication("idem-concurrency")
const CONCURRENCY = 200
const { payload } = Counting
// PGlite runs one statement at a time: there a race is a queue, and one round shows as much as three
const ROUNDS = serverUrl === undefined ? 1 : 3

const StoreLive = Layer.effect(
  IdempotencyStore.IdempotencyStore,
  Effect.zipRight(resetTable({ table: TABLE }), PgIdempotencyStore.make({ table: TABLE }))
).pipe(
  Layer.provideMerge(layerClient({ maxConnections: 20, applicationName: APPLICATION })),
  Layer.provideMerge(layerPrimary)
)

/** `CONCURRENCY` reservations of `id` at once: the one that reserved it, as attempt `attempt`, seen by all. */
const raceReservations = (
  store: IdempotencyStore.IdempotencyStore["Type"],
  id: IdempotencyRecord.RecordId,
  attempt: number
) =>
  Effect.map(
    Effect.all(
      Array.from({ length: CONCURRENCY }, () => store.reserve(reserveRequest(id))),
      { concurrency: "unbounded" }
    ),
    (results) => StoreRaces.assertOneOwner(results, attempt)
  )

layer(StoreLive, { excludeTestServices: true, timeout: "2 minutes" })("PgIdempotencyStore concurrency", (it) => {
  it.effect(`${CONCURRENCY} concurrent runs of one key execute the downstream once`, () =>
    Effect.gen(function*() {
      for (let round = 0; round < ROUNDS; round++) {
        const { executions, operation } = yield* StoreRaces.operation
        const key = randomUUID()
        const exits = yield* Effect.all(
          Array.from({ length: CONCURRENCY }, () => Effect.exit(operation.run({ key, payload }))),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(yield* Ref.get(executions), 1)
        StoreRaces.assertOneOutcome(exits, 1)
        const replay = yield* operation.runDetailed({ key, payload })
        assert.isTrue(replay.replayed)
        assert.strictEqual(replay.value, 1)
      }
    }))

  it.effect(`${CONCURRENCY} concurrent reservations of one key: one owner, every other sees it`, () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      for (let round = 0; round < ROUNDS; round++) {
        const id = freshId()
        yield* raceReservations(store, id, 1)
      }
    }))

  it.effect(`${CONCURRENCY} concurrent takeovers of one expired lease: one new owner, every other sees it`, () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      for (let round = 0; round < ROUNDS; round++) {
        const id = freshId()
        // a lease of 0 ends at once on the database's clock: the next statement may take it over
        const crashed = expectReserved(yield* store.reserve(reserveRequest(id, { lease: Duration.zero })))
        // never the stale snapshot of the crashed attempt
        const owner = yield* raceReservations(store, id, 2)
        assert.notStrictEqual(owner.token, crashed.token)
      }
    }))

  it.effect(`${CONCURRENCY} concurrent takeovers of a FAILED record and of an expired record: one owner each`, () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const failed = freshId()
      const first = expectReserved(yield* store.reserve(reserveRequest(failed)))
      yield* store.markFailed({ id: failed, token: first.token, ttl: Duration.hours(1) })
      const expired = freshId()
      const done = expectReserved(yield* store.reserve(reserveRequest(expired)))
      const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "1" })
      yield* store.complete({ id: expired, token: done.token, outcome, ttl: Duration.zero })
      for (const [id, attempt] of [[failed, 2], [expired, 1]] as const) {
        yield* raceReservations(store, id, attempt)
      }
    }))

  it.effect(`${CONCURRENCY} concurrent runs on a crashed attempt's expired lease execute the downstream once`, () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      for (let round = 0; round < ROUNDS; round++) {
        const { executions, operation } = yield* StoreRaces.operation
        const key = randomUUID()
        const fingerprint = yield* Idempotency.fingerprint(Counting.Payload, payload)
        const id = IdempotencyRecord.makeRecordId({ operation: operation.name, key: IdempotencyKey.unsafeMake(key) })
        // the crashed attempt: IN_PROGRESS, lease already over
        yield* store.reserve(reserveRequest(id, { fingerprint, lease: Duration.zero }))
        const exits = yield* Effect.all(
          Array.from({ length: CONCURRENCY }, () => Effect.exit(operation.runDetailed({ key, payload }))),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(yield* Ref.get(executions), 1)
        const fresh = exits.filter((exit) => Exit.isSuccess(exit) && !exit.value.replayed)
        assert.strictEqual(fresh.length, 1)
        assert.strictEqual((fresh[0] as Exit.Success<Idempotency.Result<number>, never>).value.attempt, 2)
        StoreRaces.assertOneOutcome(exits.map((exit) => Exit.map(exit, (result) => result.value)), 1)
      }
    }))
})

if (serverUrl !== undefined) {
  /** Waits (bounded) until one of the store's statements waits for a row lock. */
  const awaitLockWait = awaitLockWaits(APPLICATION)

  /** Waits (bounded) until a statement waits for a row lock, or the fiber is done. */
  const awaitLockWaitOrDone = <A, E>(fiber: Fiber.Fiber<A, E>) =>
    awaitLockWaits(APPLICATION, { orWhen: Effect.map(Fiber.poll(fiber), Option.isSome) })

  const table = `"${TABLE}"`

  /** A record in each state a reservation may take over: an ended lease, FAILED, expired. */
  const takeable = [
    { crash: "an ended lease", attempt: 2 },
    { crash: "a FAILED record", attempt: 2 },
    { crash: "an expired record", attempt: 1 }
  ] as const

  const makeTakeable = (
    store: IdempotencyStore.IdempotencyStore["Type"],
    id: IdempotencyRecord.RecordId,
    crash: typeof takeable[number]["crash"]
  ) =>
    Effect.gen(function*() {
      if (crash === "an ended lease") {
        return expectReserved(yield* store.reserve(reserveRequest(id, { lease: Duration.zero })))
      }
      const first = expectReserved(yield* store.reserve(reserveRequest(id)))
      if (crash === "a FAILED record") {
        yield* store.markFailed({ id, token: first.token, ttl: Duration.hours(1) })
      } else {
        const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "1" })
        yield* store.complete({ id, token: first.token, outcome, ttl: Duration.zero })
      }
      return first
    })

  /** What a concurrent takeover by the holder writes: a new owner with a live lease. */
  const takeOver = `UPDATE ${table} SET status = 'IN_PROGRESS', token = 'holder', attempt = attempt + 1,
      lease_until = ${DB_NOW} + 3600000, expires_at = ${DB_NOW} + 3600000, outcome_kind = NULL, outcome = NULL
    WHERE id = $1`

  /** A statement of the holder's transaction, with its parameters. */
  type Statement = readonly [text: string, params?: ReadonlyArray<unknown>]

  /**
   * A reservation of `id` meets the holder's transaction: the holder begins and runs `hold`, the
   * reservation starts and waits for a row lock, then the holder runs `release`, which ends its
   * transaction. The reservation's answer.
   */
  const reserveAgainst = (
    id: IdempotencyRecord.RecordId,
    hold: ReadonlyArray<Statement>,
    release: ReadonlyArray<Statement>
  ) =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const database = yield* TestDatabase
      const holder = yield* rawClient(database.url, runApplication("idem-concurrency-holder"))
      yield* rawQuery(holder, "BEGIN")
      for (const [text, params] of hold) yield* rawQuery(holder, text, params)
      const waiting = yield* Effect.fork(store.reserve(reserveRequest(id)))
      yield* awaitLockWait
      for (const [text, params] of release) yield* rawQuery(holder, text, params)
      return yield* Fiber.join(waiting)
    })

  /** A first reservation of `id` by the holder, with a live lease. */
  const insertHeld = (id: IdempotencyRecord.RecordId): Statement => [
    `INSERT INTO ${table} (id, operation, scope, key, status, token, fingerprint, attempt, lease_until,
       expires_at, created_at, updated_at)
     VALUES ($1, $2, NULL, $3, 'IN_PROGRESS', 'holder', $4, 1, ${DB_NOW} + 3600000, ${DB_NOW} + 3600000,
       ${DB_NOW}, ${DB_NOW})`,
    [id.value, id.operation, id.key, FP_A]
  ]
  const lockRow = (id: IdempotencyRecord.RecordId): Statement => [
    `SELECT 1 FROM ${table} WHERE id = $1 FOR UPDATE`,
    [id.value]
  ]
  const takeOverRow = (id: IdempotencyRecord.RecordId): Statement => [takeOver, [id.value]]
  const deleteRow = (id: IdempotencyRecord.RecordId): Statement => [`DELETE FROM ${table} WHERE id = $1`, [id.value]]
  const COMMIT: Statement = ["COMMIT"]

  /** The reservation answered the holder's takeover (attempt 2, IN_PROGRESS, its lease running), never the crashed record, and the table holds it. */
  const assertHolderTookOver = (
    store: IdempotencyStore.IdempotencyStore["Type"],
    id: IdempotencyRecord.RecordId,
    existing: ReturnType<typeof expectExisting>,
    crashed: { readonly token: string }
  ) =>
    Effect.gen(function*() {
      const { attempt, leaseUntil, status, token } = existing.record
      assert.notStrictEqual(token, crashed.token)
      assert.deepStrictEqual({ token, attempt, status }, { token: "holder", attempt: 2, status: "IN_PROGRESS" })
      assert.isTrue(leaseUntil > existing.now)
      assert.strictEqual(Option.getOrThrow(yield* store.get(id)).token, "holder")
    })

  layer(StoreLive, { excludeTestServices: true, timeout: "2 minutes" })("PgIdempotencyStore interleavings", (it) => {
    it.scoped("a reservation whose insert waited for a concurrent first insert returns the inserted record", () =>
      Effect.gen(function*() {
        const id = freshId()
        // the read after the insert sees the committed record, not the snapshot the call started with
        const existing = expectExisting(yield* reserveAgainst(id, [insertHeld(id)], [COMMIT]))
        assert.strictEqual(existing.record.token, "holder")
        assert.strictEqual(existing.record.status, "IN_PROGRESS")
        assert.strictEqual(existing.record.attempt, 1)
        assert.isTrue(existing.record.leaseUntil > existing.now)
      }))

    it.scoped("a reservation whose insert waited for a concurrent insert that rolled back reserves the record", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const reserved = expectReserved(yield* reserveAgainst(id, [insertHeld(id)], [["ROLLBACK"]]))
        assert.strictEqual(reserved.attempt, 1)
        assert.strictEqual(Option.getOrThrow(yield* store.get(id)).token, reserved.token)
      }))

    for (const { attempt, crash } of takeable) {
      it.scoped(`a reservation whose insert waited for a concurrent takeover of ${crash} returns the new owner`, () =>
        Effect.gen(function*() {
          const store = yield* IdempotencyStore.IdempotencyStore
          const id = freshId()
          const crashed = yield* makeTakeable(store, id, crash)
          const existing = expectExisting(yield* reserveAgainst(id, [takeOverRow(id)], [COMMIT]))
          yield* assertHolderTookOver(store, id, existing, crashed)
        }))

      it.scoped(`a takeover of ${crash} whose update waited for a concurrent takeover returns the new owner`, () =>
        Effect.gen(function*() {
          const store = yield* IdempotencyStore.IdempotencyStore
          const id = freshId()
          const crashed = yield* makeTakeable(store, id, crash)
          // a row lock only: the reservation's insert and read pass it, its update waits for it; the
          // update's condition, evaluated again on the holder's row version, no longer holds
          const existing = expectExisting(yield* reserveAgainst(id, [lockRow(id)], [takeOverRow(id), COMMIT]))
          yield* assertHolderTookOver(store, id, existing, crashed)
        }))

      it.scoped(`a takeover of ${crash} whose update waited for a lock released unchanged takes it over`, () =>
        Effect.gen(function*() {
          const store = yield* IdempotencyStore.IdempotencyStore
          const id = freshId()
          const crashed = yield* makeTakeable(store, id, crash)
          const reserved = expectReserved(yield* reserveAgainst(id, [lockRow(id)], [COMMIT]))
          assert.strictEqual(reserved.attempt, attempt)
          assert.notStrictEqual(reserved.token, crashed.token)
          assert.strictEqual(Option.getOrThrow(yield* store.get(id)).token, reserved.token)
        }))

      it.scoped(`a takeover of ${crash} whose update waited for a concurrent release creates the record afresh`, () =>
        Effect.gen(function*() {
          const store = yield* IdempotencyStore.IdempotencyStore
          const id = freshId()
          yield* makeTakeable(store, id, crash)
          // the update finds no row; the next round inserts
          const reserved = expectReserved(yield* reserveAgainst(id, [lockRow(id)], [deleteRow(id), COMMIT]))
          assert.strictEqual(reserved.attempt, 1)
          assert.strictEqual(Option.getOrThrow(yield* store.get(id)).token, reserved.token)
        }))
    }

    it.scoped("a takeover whose insert waited for a concurrent release creates the record afresh", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        yield* store.reserve(reserveRequest(id, { lease: Duration.zero }))
        const reserved = expectReserved(yield* reserveAgainst(id, [deleteRow(id)], [COMMIT]))
        assert.strictEqual(reserved.attempt, 1)
        const record = Option.getOrThrow(yield* store.get(id))
        assert.strictEqual(record.token, reserved.token)
      }))

    it.scoped("a purge never deletes an expired record that a concurrent reservation is reviving", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const database = yield* TestDatabase
        const holder = yield* rawClient(database.url, runApplication("idem-concurrency-holder"))
        const id = freshId()
        const first = expectReserved(yield* store.reserve(reserveRequest(id)))
        const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "1" })
        yield* store.complete({ id, token: first.token, outcome, ttl: Duration.zero })
        yield* rawQuery(holder, "BEGIN")
        yield* rawQuery(
          holder,
          `UPDATE ${table} SET status = 'IN_PROGRESS', token = 'holder', attempt = 1,
             lease_until = ${DB_NOW} + 3600000, expires_at = ${DB_NOW} + 3600000
           WHERE id = $1`,
          [id.value]
        )
        const purge = yield* Effect.fork(store.purgeExpired({ limit: 10_000 }))
        // the purge either skips the locked row and ends, or waits for it: commit in both cases
        yield* awaitLockWaitOrDone(purge)
        yield* rawQuery(holder, "COMMIT")
        yield* Fiber.join(purge)
        const record = Option.getOrThrow(yield* store.get(id))
        assert.strictEqual(record.token, "holder")
      }))
  })
}
