/**
 * The reservation function's paths that a race reaches only by chance, made deterministic with
 * triggers on the test table: a record that vanishes between the function's insert and its read
 * (the next round reserves it), and a record whose update never takes (the function gives up after
 * its bounded rounds, and the store fails with `StoreError`). Also: a replay, a conflict and a
 * refused takeover write nothing (no transaction id is assigned). On PGlite always, and on the
 * server when `TEST_PG_URL` is set.
 */
import { IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { PgIdempotencyStore } from "@effect-idempotency/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { expectExisting, expectReserved, FP_A, FP_B, freshId, reserveRequest } from "./utils/fixtures.js"
import { layerClient, layerPrimary, resetTable, runTable } from "./utils/TestDatabase.js"

const TABLE = runTable("idem_reserve_function")
const SKIPPED = `${TABLE}_skipped`

const exec = (text: string, params?: ReadonlyArray<unknown>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<Record<string, unknown>>(text, params).withoutTransform)

/**
 * Two triggers, each acting only on rows with a chosen token:
 *
 * - after an INSERT statement that inserted nothing (the function's insert met an existing id),
 *   the rows with token `vanishing` are deleted: the function's next read finds no record;
 * - an UPDATE of a row with token `stubborn` is skipped, and counted in a sequence: the function's
 *   update never takes, as if a concurrent writer changed the record in every round.
 */
const installTriggers = Effect.forEach(
  [
    `CREATE OR REPLACE FUNCTION ${TABLE}_vanish() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM inserted) THEN
    DELETE FROM "${TABLE}" WHERE token = 'vanishing';
  END IF;
  RETURN NULL;
END
$$`,
    `CREATE TRIGGER vanish AFTER INSERT ON "${TABLE}" REFERENCING NEW TABLE AS inserted
FOR EACH STATEMENT EXECUTE FUNCTION ${TABLE}_vanish()`,
    `DROP SEQUENCE IF EXISTS ${SKIPPED}`,
    `CREATE SEQUENCE ${SKIPPED}`,
    `CREATE OR REPLACE FUNCTION ${TABLE}_skip() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.token = 'stubborn' THEN
    PERFORM nextval('${SKIPPED}');
    RETURN NULL;
  END IF;
  RETURN NEW;
END
$$`,
    `CREATE TRIGGER skip BEFORE UPDATE ON "${TABLE}" FOR EACH ROW EXECUTE FUNCTION ${TABLE}_skip()`
  ],
  (statement) => exec(statement),
  { discard: true }
)

const StoreLive = Layer.effect(
  IdempotencyStore.IdempotencyStore,
  resetTable({ table: TABLE }).pipe(
    Effect.zipRight(installTriggers),
    Effect.zipRight(PgIdempotencyStore.make({ table: TABLE }))
  )
).pipe(
  Layer.provideMerge(layerClient()),
  Layer.provideMerge(layerPrimary)
)

/** Inserts a record as another writer would, bypassing the store. */
const seed = (id: IdempotencyRecord.RecordId, token: string, status: IdempotencyRecord.Status) =>
  exec(
    `INSERT INTO "${TABLE}" (id, operation, scope, key, status, token, fingerprint, attempt, lease_until, expires_at,
       created_at, updated_at)
     VALUES ($1, $2, NULL, $3, $4, $5, $6, 1, 0, 9007199254740991, 0, 0)`,
    [id.value, id.operation, id.key, status, token, FP_A]
  )

/** The transaction id of the current transaction, or null when it has written nothing. */
const transactionId = Effect.map(
  exec("SELECT pg_current_xact_id_if_assigned()::text AS xid"),
  (rows) => rows[0]!.xid as string | null
)

layer(StoreLive, { excludeTestServices: true, timeout: "2 minutes" })(
  "PgIdempotencyStore reservation function",
  (it) => {
    it.effect("a record that vanishes between the function's insert and its read is reserved in the next round", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        // live, IN_PROGRESS, another owner: a reservation that read it would get Existing
        yield* seed(id, "vanishing", "IN_PROGRESS")
        assert.isTrue(Option.isSome(yield* store.get(id)))
        const reserved = expectReserved(yield* store.reserve(reserveRequest(id)))
        assert.strictEqual(reserved.attempt, 1)
        const record = Option.getOrThrow(yield* store.get(id))
        assert.strictEqual(record.token, reserved.token)
        assert.strictEqual(record.status, "IN_PROGRESS")
      }))

    it.effect("a record whose update never takes: the function gives up after 5 rounds, the store fails", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        // FAILED with the request's fingerprint: the takeover rule gives it to the request every round
        yield* seed(id, "stubborn", "FAILED")
        const error = yield* Effect.flip(store.reserve(reserveRequest(id, { fingerprint: FP_A })))
        assert.strictEqual(error._tag, "StoreError")
        assert.strictEqual(error.method, "reserve")
        // the exception the function raises (SQLSTATE P0001, raise_exception)
        const cause =
          (error as unknown as { readonly cause: { readonly cause: { readonly code: string } } }).cause.cause
        assert.strictEqual(cause.code, "P0001")
        assert.include(String(cause), "did not settle")
        const skipped = yield* exec(`SELECT last_value FROM ${SKIPPED}`)
        assert.strictEqual(Number(skipped[0]!.last_value), 5)
        const record = Option.getOrThrow(yield* store.get(id))
        assert.strictEqual(record.token, "stubborn")
        assert.strictEqual(record.status, "FAILED")
      }))

    it.effect("a replay, a conflict and a refused takeover write nothing; a reservation writes", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const store = yield* IdempotencyStore.IdempotencyStore
        // the triggers' records, should a test above have left one: the trigger would delete it here
        yield* exec(`DELETE FROM "${TABLE}" WHERE token IN ('vanishing', 'stubborn')`)
        const completed = freshId()
        const first = expectReserved(yield* store.reserve(reserveRequest(completed)))
        const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "1" })
        yield* store.complete({ id: completed, token: first.token, outcome, ttl: Duration.hours(1) })
        const inProgress = freshId()
        yield* store.reserve(reserveRequest(inProgress))
        const failed = freshId()
        const owner = expectReserved(yield* store.reserve(reserveRequest(failed)))
        yield* store.markFailed({ id: failed, token: owner.token, ttl: Duration.hours(1) })

        const duplicates = [
          ["replay", reserveRequest(completed), "COMPLETED"],
          ["conflict", reserveRequest(inProgress), "IN_PROGRESS"],
          ["refused takeover", reserveRequest(failed, { fingerprint: FP_B }), "FAILED"]
        ] as const
        for (const [name, request, status] of duplicates) {
          const xid = yield* sql.withTransaction(
            Effect.zipRight(
              Effect.map(
                store.reserve(request),
                (result) => assert.strictEqual(expectExisting(result).record.status, status)
              ),
              transactionId
            )
          )
          assert.isNull(xid, name)
        }
        const written = yield* sql.withTransaction(
          Effect.zipRight(store.reserve(reserveRequest(freshId())), transactionId)
        )
        assert.isNotNull(written)
      }))
  }
)
