/**
 * The transactional mode's shared suite, for `PgTransactional` and for `SqlTransactional` (MariaDB,
 * SQLite, libSQL): what each exit commits, counted from the database (the user's rows and the
 * record), replays across the two modes in both directions, a normal-mode attempt in progress or
 * left past its lease, a reused key, the store's view of a record and a caller's own transaction.
 *
 * Each package gives its layer (its `SqlClient`, its store on the records table, and an empty orders
 * table), its mode's `make` on that table and its SQL for the orders; `more` adds the package's own
 * cases inside the same layer. `faults` is the same mode when the database stops answering, through a
 * proxy in front of it.
 */
import {
  Idempotency,
  IdempotencyContext,
  IdempotencyKey,
  IdempotencyPolicy,
  IdempotencyRecord,
  IdempotencyStore
} from "@effect-idempotency/core"
import type { TcpProxy } from "@effect-idempotency/testing"
import { Timing } from "@effect-idempotency/testing"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type { Vitest } from "@effect/vitest"
import { assert, layer } from "@effect/vitest"
import * as Cause from "effect/Cause"
import type * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"

export const Order = Schema.Struct({ orderId: Schema.String, quantity: Schema.Int })
export const NewOrder = Schema.Struct({ sku: Schema.String, quantity: Schema.Int })
export class OutOfStock extends Schema.TaggedError<OutOfStock>()("OutOfStock", { sku: Schema.String }) {}

export const payload = { sku: "A-1", quantity: 2 }

/** The user's rows of a key and the key's records, as the database counts them. */
export interface Counts {
  readonly orders: number
  readonly records: number
  readonly status: string | null
}

/** A downstream of the mode: it runs in the attempt's transaction. */
export type Execute<E> = (
  order: typeof NewOrder.Type
) => Effect.Effect<typeof Order.Type, E, SqlClient.SqlClient | IdempotencyContext.IdempotencyContext>

/** The settings the suite varies. */
export interface Settings {
  readonly timeout?: Duration.DurationInput
  readonly onTimeout?: IdempotencyPolicy.TimeoutPolicy
  readonly onFailure?: () => IdempotencyPolicy.FailurePolicy
  readonly inProgress?: IdempotencyPolicy.InProgressPolicy
}

/** A transactional operation, as the suite runs it. */
export interface Operation {
  readonly run: (
    request: Idempotency.Request<typeof NewOrder.Type>
  ) => Effect.Effect<typeof Order.Type, unknown, SqlClient.SqlClient>
  readonly runDetailed: (
    request: Idempotency.Request<typeof NewOrder.Type>
  ) => Effect.Effect<Idempotency.Result<typeof Order.Type>, unknown, SqlClient.SqlClient>
}

/** What a package gives the suite. */
export interface Mode {
  /** The mode's operation on the suite's records table: payload `NewOrder`, success `Order`, failure `OutOfStock`. */
  readonly operation: <E = never>(name: string, execute: Execute<E>, settings?: Settings) => Operation
  /** Writes an order row of the run's key through the context's `SqlClient`. */
  readonly insertOrder: Execute<SqlError>
  /** The user's rows of a key and the key's records. */
  readonly counts: (key: string) => Effect.Effect<Counts, unknown, SqlClient.SqlClient>
}

/** The mode's operation under `name` whose downstream writes an order row, counting its executions. */
export const countingOperation = (mode: Mode, name: string, settings?: Settings) =>
  Effect.map(Ref.make(0), (executions) => ({
    executions,
    op: mode.operation(
      name,
      (order) => Effect.zipLeft(mode.insertOrder(order), Ref.update(executions, (n) => n + 1)),
      settings
    )
  }))

/** The typed failure of an exit that must be a failure. */
export const failureOf = (exit: Exit.Exit<unknown, unknown>): unknown => {
  assert.isTrue(Exit.isFailure(exit), "expected a failure")
  return Option.getOrUndefined(Cause.failureOption((exit as Exit.Failure<unknown, unknown>).cause))
}

/** The tag of an exit's typed failure. */
export const tagOf = (exit: Exit.Exit<unknown, unknown>): string => (failureOf(exit) as { readonly _tag: string })._tag

type Services = SqlClient.SqlClient | IdempotencyStore.IdempotencyStore

/**
 * Registers the case of a concurrent attempt's transaction holding the key's row past the time left:
 * the waiting attempt answers `IdempotencyConflict` within its time left (not when the holder lets
 * go), and writes nothing. `waiting`, when the database tells, counts the statements still waiting
 * for a lock (none once it answered).
 */
export const lockWait = (
  it: Vitest.MethodsNonLive<Services, true>,
  mode: Mode,
  waiting?: Effect.Effect<number, unknown, SqlClient.SqlClient>
) =>
  it.effect("a concurrent attempt's transaction holding the row past the time left: IdempotencyConflict within it, nothing written", () =>
    Effect.gen(function*() {
      const { counts, insertOrder, operation } = mode
      const key = randomUUID()
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holding = yield* Effect.fork(
        operation("tx-lock-wait", (order) =>
          Effect.zipLeft(
            insertOrder(order),
            Effect.zipRight(Deferred.succeed(started, undefined), Deferred.await(release))
          )).run({ key, payload })
      )
      yield* Deferred.await(started)
      const sentAt = Date.now()
      // the reservation waits for the holder's row lock, until the time left ends the wait
      const waited = yield* Effect.exit(
        operation("tx-lock-wait", insertOrder, { timeout: "500 millis" }).run({ key, payload })
      )
      const tookMs = Date.now() - sentAt
      assert.strictEqual(tagOf(waited), "IdempotencyConflict")
      assert.isBelow(tookMs, 5_000, "the wait ended by the attempt's time left, not by the holder")
      if (waiting !== undefined) assert.strictEqual(yield* waiting, 0, "no statement still waits for the lock")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holding)
      assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
    }))

/** Registers the suite under `name`, on `live`, with the package's cases of `more` beside it. */
export const suite = <E>(
  name: string,
  live: Layer.Layer<Services, E>,
  mode: Mode,
  more?: (it: Vitest.MethodsNonLive<Services, true>) => void
) =>
  layer(live, { excludeTestServices: true, timeout: "3 minutes" })(name, (it) => {
    const { counts, insertOrder, operation } = mode

    it.effect("a success commits the user's rows and the record together; a retry replays", () =>
      Effect.gen(function*() {
        const { executions, op } = yield* countingOperation(mode, "tx-success")
        const key = randomUUID()
        const first = yield* op.runDetailed({ key, payload })
        assert.isFalse(first.replayed)
        assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
        const retry = yield* op.runDetailed({ key, payload })
        assert.isTrue(retry.replayed)
        assert.deepStrictEqual(retry.value, first.value)
        // `Idempotency.result` sees the mode's runs as it sees the normal mode's
        const seen = yield* Idempotency.result(op.run({ key, payload }))
        assert.deepStrictEqual({ replayed: seen.replayed, attempt: seen.attempt }, { replayed: true, attempt: 1 })
        assert.strictEqual(yield* Ref.get(executions), 1)
        assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
      }))

    it.effect("a stored failure commits the record without the user's rows, and replays", () =>
      Effect.gen(function*() {
        const executions = yield* Ref.make(0)
        const op = operation("tx-stored-failure", (order) =>
          Effect.zipRight(
            Effect.zipRight(insertOrder(order), Ref.update(executions, (n) => n + 1)),
            Effect.fail(new OutOfStock({ sku: order.sku }))
          ))
        const key = randomUUID()
        assert.instanceOf(failureOf(yield* Effect.exit(op.run({ key, payload }))), OutOfStock)
        assert.deepStrictEqual(yield* counts(key), { orders: 0, records: 1, status: "COMPLETED" })
        assert.instanceOf(failureOf(yield* Effect.exit(op.run({ key, payload }))), OutOfStock)
        assert.strictEqual(yield* Ref.get(executions), 1)
      }))

    it.effect("markFailed commits a FAILED record without the user's rows; a retry takes it over", () =>
      Effect.gen(function*() {
        const fail = yield* Ref.make(true)
        const op = operation(
          "tx-mark-failed",
          (order) =>
            Effect.zipRight(
              insertOrder(order),
              Effect.flatMap(Ref.getAndSet(fail, false), (fail) =>
                fail
                  ? Effect.fail(new OutOfStock({ sku: order.sku }))
                  : Effect.succeed({ orderId: "o-2", quantity: 2 }))
            ),
          { onFailure: () => "markFailed" }
        )
        const key = randomUUID()
        assert.instanceOf(failureOf(yield* Effect.exit(op.run({ key, payload }))), OutOfStock)
        assert.deepStrictEqual(yield* counts(key), { orders: 0, records: 1, status: "FAILED" })
        const retry = yield* op.runDetailed({ key, payload })
        assert.deepStrictEqual({ replayed: retry.replayed, attempt: retry.attempt }, { replayed: false, attempt: 2 })
        assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
      }))

    const rolledBack = (
      exitName: string,
      execute: Execute<OutOfStock | SqlError>,
      check: (exit: Exit.Exit<typeof Order.Type, unknown>) => void,
      settings?: Settings
    ) =>
      it.effect(`${exitName} rolls back the user's rows and the record; a retry executes once`, () =>
        Effect.gen(function*() {
          const key = randomUUID()
          const op = operation(`tx-${exitName.replaceAll(" ", "-")}`, execute, settings)
          check(yield* Effect.exit(op.run({ key, payload })))
          assert.deepStrictEqual(yield* counts(key), { orders: 0, records: 0, status: null })
          const retry = yield* operation(`tx-${exitName.replaceAll(" ", "-")}`, insertOrder).runDetailed({
            key,
            payload
          })
          assert.isFalse(retry.replayed)
          assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
        }))

    rolledBack(
      "a failure the policy releases",
      (order) => Effect.zipRight(insertOrder(order), Effect.fail(new OutOfStock({ sku: order.sku }))),
      (exit) => assert.instanceOf(failureOf(exit), OutOfStock),
      { onFailure: () => "release" }
    )

    rolledBack(
      "a defect",
      (order) => Effect.zipRight(insertOrder(order), Effect.dieMessage("boom")),
      (exit) => assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause))
    )

    rolledBack(
      "an interruption of the downstream",
      (order) => Effect.zipRight(insertOrder(order), Effect.interrupt),
      (exit) => assert.isTrue(Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause))
    )

    rolledBack(
      "a timeout",
      (order) => Effect.zipRight(insertOrder(order), Effect.never),
      (exit) => {
        const error = failureOf(exit) as {
          readonly _tag: string
          readonly rolledBack?: boolean
          readonly message: string
        }
        assert.deepStrictEqual({ tag: error._tag, rolledBack: error.rolledBack }, {
          tag: "DownstreamTimeout",
          rolledBack: true
        })
        assert.include(error.message, "rolled back")
      },
      { timeout: "300 millis" }
    )

    it.effect("an interrupted caller rolls back the user's rows and the record", () =>
      Effect.gen(function*() {
        const key = randomUUID()
        const wrote = yield* Deferred.make<void>()
        const op = operation(
          "tx-caller-interrupted",
          (order) =>
            Effect.zipLeft(insertOrder(order), Effect.zipRight(Deferred.succeed(wrote, undefined), Effect.never))
        )
        const fiber = yield* Effect.fork(op.run({ key, payload }))
        yield* Deferred.await(wrote)
        yield* Fiber.interrupt(fiber)
        assert.deepStrictEqual(yield* counts(key), { orders: 0, records: 0, status: null })
      }))

    it.effect("a record of the transactional mode replays in the normal mode, and the other way round", () =>
      Effect.gen(function*() {
        const executions = yield* Ref.make(0)
        const execute = (order: typeof NewOrder.Type) =>
          Effect.zipLeft(insertOrder(order), Ref.update(executions, (n) => n + 1))
        const transactional = operation("tx-cross", execute)
        const normal = Idempotency.make({
          name: "tx-cross",
          payload: NewOrder,
          success: Order,
          failure: OutOfStock,
          execute
        })

        const a = randomUUID()
        const fresh = yield* transactional.runDetailed({ key: a, payload })
        const replayed = yield* normal.runDetailed({ key: a, payload })
        assert.deepStrictEqual({ replayed: replayed.replayed, value: replayed.value }, {
          replayed: true,
          value: fresh.value
        })
        const b = randomUUID()
        const freshNormal = yield* normal.runDetailed({ key: b, payload })
        const replayedTx = yield* transactional.runDetailed({ key: b, payload })
        assert.deepStrictEqual({ replayed: replayedTx.replayed, value: replayedTx.value }, {
          replayed: true,
          value: freshNormal.value
        })
        assert.strictEqual(yield* Ref.get(executions), 2)
        assert.deepStrictEqual(yield* counts(a), { orders: 1, records: 1, status: "COMPLETED" })
        assert.deepStrictEqual(yield* counts(b), { orders: 1, records: 1, status: "COMPLETED" })
      }))

    it.effect("a normal-mode attempt in progress gives IdempotencyConflict, or a wait until its outcome", () =>
      Effect.gen(function*() {
        const key = randomUUID()
        const release = yield* Deferred.make<void>()
        const started = yield* Deferred.make<void>()
        const normal = Idempotency.make({
          name: "tx-in-progress",
          payload: NewOrder,
          success: Order,
          execute: () =>
            Effect.zipRight(
              Effect.zipRight(Deferred.succeed(started, undefined), Deferred.await(release)),
              Effect.succeed({ orderId: "normal", quantity: 2 })
            )
        })
        const running = yield* Effect.fork(normal.run({ key, payload }))
        yield* Deferred.await(started)
        const conflict = yield* Effect.exit(operation("tx-in-progress", insertOrder).run({ key, payload }))
        assert.strictEqual(tagOf(conflict), "IdempotencyConflict")
        const waiting = yield* Effect.fork(
          operation("tx-in-progress", insertOrder, {
            inProgress: IdempotencyPolicy.waitOnConflict(Schedule.spaced("20 millis"))
          }).runDetailed({ key, payload })
        )
        yield* Effect.sleep("100 millis")
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(running)
        const waited = yield* Fiber.join(waiting)
        assert.deepStrictEqual({ replayed: waited.replayed, orderId: waited.value.orderId }, {
          replayed: true,
          orderId: "normal"
        })
        assert.deepStrictEqual(yield* counts(key), { orders: 0, records: 1, status: "COMPLETED" })
      }))

    it.effect("a normal-mode record left in progress past its lease: taken over, unless onTimeout is markUnknown", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        // a normal-mode attempt that crashed (no takeover: its operation is markUnknown), its lease over
        const crashed = (name: string) =>
          Effect.gen(function*() {
            const key = randomUUID()
            yield* store.reserve({
              id: IdempotencyRecord.makeRecordId({ operation: name, key: IdempotencyKey.unsafeMake(key) }),
              token: "crashed",
              fingerprint: yield* Idempotency.fingerprint(NewOrder, payload),
              lease: Duration.millis(100),
              ttl: Duration.hours(1),
              takeover: false
            })
            return key
          })
        const unknown = yield* crashed("tx-left-unknown")
        const kept = yield* crashed("tx-left-kept")
        yield* Effect.sleep("300 millis")
        // as the normal mode does under markUnknown: the outcome is unknown, nothing runs
        const refused = yield* Effect.exit(
          operation("tx-left-unknown", insertOrder, { onTimeout: "markUnknown" }).run({ key: unknown, payload })
        )
        const error = failureOf(refused) as { readonly _tag: string; readonly replayed?: boolean }
        assert.deepStrictEqual({ tag: error._tag, replayed: error.replayed }, {
          tag: "DownstreamTimeout",
          replayed: true
        })
        assert.deepStrictEqual(yield* counts(unknown), { orders: 0, records: 1, status: "IN_PROGRESS" })
        // the default: the lease is over, the record is taken over
        const result = yield* operation("tx-left-kept", insertOrder).runDetailed({ key: kept, payload })
        assert.deepStrictEqual({ replayed: result.replayed, attempt: result.attempt }, { replayed: false, attempt: 2 })
        assert.deepStrictEqual(yield* counts(kept), { orders: 1, records: 1, status: "COMPLETED" })
      }))

    it.effect("the same key with another request fails with KeyReused, and writes nothing", () =>
      Effect.gen(function*() {
        const key = randomUUID()
        const op = operation("tx-key-reused", insertOrder)
        yield* op.run({ key, payload })
        const reused = yield* Effect.exit(op.run({ key, payload: { sku: "B-2", quantity: 1 } }))
        assert.strictEqual(tagOf(reused), "KeyReused")
        assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
      }))

    it.effect("runs on the store's table: the normal mode's store sees the committed record", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const key = randomUUID()
        yield* operation("tx-store-view", insertOrder).run({ key, payload })
        const id = IdempotencyRecord.makeRecordId({ operation: "tx-store-view", key: IdempotencyKey.unsafeMake(key) })
        const record = yield* store.get(id)
        assert.isTrue(Option.isSome(record) && record.value.status === "COMPLETED" && record.value.attempt === 1)
      }))

    it.effect("inside a transaction of the caller's: the record commits, or rolls back, with the caller's", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const op = operation("tx-nested", insertOrder)
        const committed = randomUUID()
        yield* sql.withTransaction(op.run({ key: committed, payload, deadline: Date.now() + 10_000 }))
        assert.deepStrictEqual(yield* counts(committed), { orders: 1, records: 1, status: "COMPLETED" })

        const rolledBack = randomUUID()
        const exit = yield* Effect.exit(sql.withTransaction(
          Effect.zipRight(op.run({ key: rolledBack, payload }), Effect.fail("the caller's own failure" as const))
        ))
        assert.strictEqual(failureOf(exit), "the caller's own failure")
        assert.deepStrictEqual(yield* counts(rolledBack), { orders: 0, records: 0, status: null })
        const retry = yield* op.runDetailed({ key: rolledBack, payload })
        assert.isFalse(retry.replayed)
      }))

    more?.(it)
  })

/** A transactional operation of the faults suite: payload `{ n }`, success a string. */
export interface FaultsOperation {
  readonly run: (
    request: Idempotency.Request<{ readonly n: number }>
  ) => Effect.Effect<string, unknown, SqlClient.SqlClient>
  readonly runDetailed: (
    request: Idempotency.Request<{ readonly n: number }>
  ) => Effect.Effect<Idempotency.Result<string>, unknown, SqlClient.SqlClient>
}

/** What a package gives the faults suite. */
export interface FaultsMode<R> {
  /** A proxy in front of the database, and the context of a client whose connections go through it. */
  readonly proxied: Effect.Effect<
    { readonly proxy: TcpProxy.TcpProxy; readonly context: Context.Context<SqlClient.SqlClient> },
    unknown,
    Scope.Scope | R
  >
  /** The mode's operation on the records table, running `execute`. */
  readonly operation: <E>(
    name: string,
    execute: Effect.Effect<string, E, SqlClient.SqlClient | IdempotencyContext.IdempotencyContext>,
    settings?: Settings
  ) => FaultsOperation
  /** Writes an order row of the attempt's key through the attempt's `SqlClient`. */
  readonly insertOrder: Effect.Effect<void, SqlError, SqlClient.SqlClient | IdempotencyContext.IdempotencyContext>
  /** The user's rows of a key and the key's records, counted through the test's own client. */
  readonly counts: (key: string) => Effect.Effect<Counts, unknown, SqlClient.SqlClient>
  /**
   * Whether the database rolls back a cut connection's transaction only once it notices the cut
   * (MariaDB): the check then waits for it. Otherwise it is rolled back when the run answers.
   */
  readonly rollsBackCutLater?: boolean
}

/** The faults suite's operation, as the options of the mode's `make` (without its table): payload `{ n }`, success a string. */
export const faultsOperation = <E>(
  name: string,
  execute: Effect.Effect<string, E, SqlClient.SqlClient | IdempotencyContext.IdempotencyContext>,
  settings?: Settings
) => ({ name, payload: Schema.Struct({ n: Schema.Int }), success: Schema.String, execute: () => execute, ...settings })

/** Writes an order row (`id`, `key`, `sku`, `quantity`) of the attempt's key into `orders`, through the attempt's `SqlClient`. */
export const insertKeyOrder = (orders: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { key } = yield* IdempotencyContext.IdempotencyContext
    yield* sql`INSERT INTO ${sql(orders)} ${sql.insert({ id: randomUUID(), key, sku: payload.sku, quantity: 1 })}`
  })

/** Runs `run` with a deadline `millis` away; it must answer while the proxy still holds (or 20 s at most). */
const answeredWhileHeld = <A, E>(run: (deadline: number) => Effect.Effect<A, E>, millis: number) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(run(Date.now() + millis))
    const exit = yield* Fiber.await(fiber).pipe(Effect.timeout("20 seconds"), Effect.option)
    assert.isTrue(Option.isSome(exit), "the attempt did not answer by its deadline while the database held it")
    return (exit as Option.Some<Exit.Exit<A, E>>).value
  })

/**
 * The faults suite under `name`, on `live` (the test's own client, and the tables): the attempt
 * answers by its end (the request's deadline) whatever the database does, says what is known of
 * the transaction, and a retry then replays or executes once. A ROLLBACK that fails leaves the
 * run's own error in place.
 */
export const faults = <R, E>(name: string, live: Layer.Layer<R | SqlClient.SqlClient, E>, mode: FaultsMode<R>) =>
  layer(live, { excludeTestServices: true, timeout: "2 minutes" })(name, (it) => {
    const { counts, insertOrder, operation, proxied } = mode

    it.scoped(
      "COMMIT sent, its answer held past the deadline: StoreUnavailable (commit) at the deadline; the retry replays",
      () =>
        Effect.gen(function*() {
          const { context, proxy } = yield* proxied
          const executions = yield* Ref.make(0)
          const op = operation(
            "tx-commit-held",
            Effect.as(Effect.zipRight(insertOrder, Ref.update(executions, (n) => n + 1)), "done")
          )
          const key = randomUUID()
          yield* Effect.provide(SqlClient.SqlClient, context) // the pool's first connection, before the stall is armed
          yield* proxy.stall({ hold: "answers", when: (bytes) => Buffer.from(bytes).includes("COMMIT") })
          const exit = yield* answeredWhileHeld(
            (deadline) => Effect.provide(op.run({ key, payload: { n: 1 }, deadline }), context),
            1_500
          )
          const error = failureOf(exit) as { readonly _tag: string; readonly method?: string }
          assert.deepStrictEqual({ tag: error._tag, method: error.method }, {
            tag: "StoreUnavailable",
            method: "commit"
          })

          // the COMMIT reached the database: once its answer is delivered, the key replays
          yield* proxy.resume
          yield* Timing.eventually(Effect.map(counts(key), (seen) => seen.records === 1), "the COMMIT was not applied")
          const retry = yield* Effect.provide(op.runDetailed({ key, payload: { n: 1 } }), context)
          assert.deepStrictEqual({ replayed: retry.replayed, value: retry.value }, { replayed: true, value: "done" })
          assert.strictEqual(yield* Ref.get(executions), 1)
          assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
        })
    )

    it.scoped(
      "the recording's answer held past the deadline: DownstreamTimeout, rolled back, at the deadline; the retry executes once",
      () =>
        Effect.gen(function*() {
          const { context, proxy } = yield* proxied
          const executions = yield* Ref.make(0)
          const op = operation(
            "tx-record-held",
            insertOrder.pipe(
              Effect.zipRight(Ref.updateAndGet(executions, (n) => n + 1)),
              // the first execution's recording gets no answer
              Effect.tap((n) => n === 1 ? proxy.stall({ hold: "answers" }) : Effect.void),
              Effect.as("done")
            )
          )
          const key = randomUUID()
          const exit = yield* answeredWhileHeld(
            (deadline) => Effect.provide(op.run({ key, payload: { n: 1 }, deadline }), context),
            1_500
          )
          const error = failureOf(exit) as { readonly _tag: string; readonly rolledBack?: boolean }
          assert.deepStrictEqual({ tag: error._tag, rolledBack: error.rolledBack }, {
            tag: "DownstreamTimeout",
            rolledBack: true
          })

          yield* proxy.resume
          const retry = yield* Effect.provide(op.runDetailed({ key, payload: { n: 1 } }), context)
          assert.isFalse(retry.replayed)
          assert.strictEqual(yield* Ref.get(executions), 2)
          assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
        })
    )

    it.scoped("a ROLLBACK that fails (the connection is gone): the run fails with the downstream's own error", () =>
      Effect.gen(function*() {
        const { context, proxy } = yield* proxied
        const op = operation(
          "tx-rollback-fails",
          insertOrder.pipe(Effect.zipRight(proxy.cut), Effect.zipRight(Effect.fail(new OutOfStock({ sku: "A-1" })))),
          { onFailure: () => "release" }
        )
        const key = randomUUID()
        const exit = yield* Effect.exit(Effect.provide(op.run({ key, payload: { n: 1 } }), context))
        assert.instanceOf(failureOf(exit), OutOfStock)
        if (mode.rollsBackCutLater === true) {
          yield* Timing.eventually(
            Effect.map(counts(key), (seen) => seen.orders === 0 && seen.records === 0),
            "the cut connection's transaction was not rolled back"
          )
        } else {
          assert.deepStrictEqual(yield* counts(key), { orders: 0, records: 0, status: null })
        }
      }))
  })
