/**
 * The transactional mode (`DynamoDbTransactional`) on DynamoDB Local: what each exit writes,
 * counted from the tables themselves (the user's items and the record), replays across the two
 * modes in both directions, a plan that writes the record's own item (refused before it is sent),
 * and a race on one key. dynalite has no transactions: there the mode must fail with `StoreError`
 * and write nothing.
 */
import type { AttributeValue, TransactWriteItem } from "@aws-sdk/client-dynamodb"
import { ScanCommand } from "@aws-sdk/client-dynamodb"
import {
  Idempotency,
  IdempotencyContext,
  IdempotencyKey,
  IdempotencyRecord,
  IdempotencyStore
} from "@effect-idempotency/core"
import { DynamoDbClient, DynamoDbTransactional } from "@effect-idempotency/dynamodb"
import { TcpProxy } from "@effect-idempotency/testing"
import { assert, layer } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import type { Backend } from "./utils/backends.js"
import { backends, clientConfig, storeLayer, tableLayer, uniqueTableName } from "./utils/backends.js"
import { recordRequests } from "./utils/requests.js"

const Order = Schema.Struct({ orderId: Schema.String })
const NewOrder = Schema.Struct({ sku: Schema.String })
class OutOfStock extends Schema.TaggedError<OutOfStock>()("OutOfStock", { sku: Schema.String }) {}

const RACE = 50

/** The user's items of a key and the key's records, read from the tables with consistent scans. */
const counts = (tables: { readonly records: string; readonly orders: string }, key: string) =>
  Effect.gen(function*() {
    const { client } = yield* DynamoDbClient.DynamoDbClient
    const scan = (TableName: string, attribute: string, value: string) =>
      Effect.promise(() =>
        client.send(
          new ScanCommand({
            TableName,
            ConsistentRead: true,
            FilterExpression: "contains(#a, :v)",
            ExpressionAttributeNames: { "#a": attribute },
            ExpressionAttributeValues: { ":v": { S: value } }
          })
        )
      )
    const orders = yield* scan(tables.orders, "key", key)
    const records = yield* scan(tables.records, "id", key)
    const record = records.Items?.[0]
    return {
      orders: orders.Count ?? 0,
      records: records.Count ?? 0,
      status: (record?.["status"] as { readonly S?: string } | undefined)?.S ?? null
    }
  })

/** One order item, with an id of its own: a second execution would show as a second item. */
const orderWrite = (ordersTable: string, sku: string) =>
  Effect.map(IdempotencyContext.IdempotencyContext, (context) => {
    const orderId = randomUUID()
    const item: Record<string, AttributeValue> = { id: { S: orderId }, key: { S: context.key }, sku: { S: sku } }
    return { writes: [{ Put: { TableName: ordersTable, Item: item } }], value: { orderId } }
  })

const failureOf = (exit: Exit.Exit<unknown, unknown>): unknown => {
  assert.isTrue(Exit.isFailure(exit), "expected a failure")
  return Option.getOrUndefined(Cause.failureOption((exit as Exit.Failure<unknown, unknown>).cause))
}

const suite = (backend: Backend) => {
  const tables = { records: uniqueTableName("tx-records"), orders: uniqueTableName("tx-orders") }
  const Live = tableLayer({ tableName: tables.orders }).pipe(
    Layer.provideMerge(storeLayer(backend, { tableName: tables.records }))
  )

  const operation = <E = never>(
    name: string,
    plan: (
      order: typeof NewOrder.Type
    ) => Effect.Effect<
      DynamoDbTransactional.Plan<typeof Order.Type>,
      E,
      IdempotencyContext.IdempotencyContext
    >,
    options?: {
      readonly onFailure?: () => "release" | "markFailed" | "store"
      readonly timeout?: Duration.DurationInput
      readonly onTimeout?: "keepLease" | "markUnknown"
    }
  ) =>
    DynamoDbTransactional.make({
      name,
      table: { tableName: tables.records },
      payload: NewOrder,
      success: Order,
      failure: OutOfStock,
      plan,
      ...options
    })

  const payload = { sku: "A-1" }

  /** A normal-mode attempt of `operation` on `key` that crashed: IN_PROGRESS, its lease of 200 ms running out. */
  const leftInProgress = (operation: string, key: string, takeover: boolean) =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const id = IdempotencyRecord.makeRecordId({ operation, key: IdempotencyKey.unsafeMake(key) })
      yield* store.reserve({
        id,
        token: "crashed",
        fingerprint: yield* Idempotency.fingerprint(NewOrder, payload),
        lease: Duration.millis(200),
        ttl: Duration.hours(1),
        takeover
      })
      return id
    })

  layer(Live, { excludeTestServices: true, timeout: Duration.seconds(90) })(
    `DynamoDbTransactional on ${backend.name}`,
    (it) => {
      if (backend.name === "dynalite") {
        it.effect("dynalite has no transactions: StoreError, and nothing is written", () =>
          Effect.gen(function*() {
            const key = randomUUID()
            const exit = yield* Effect.exit(
              operation("tx-dynalite", (order) => orderWrite(tables.orders, order.sku)).run({
                key,
                payload
              })
            )
            const error = failureOf(exit) as { readonly _tag: string; readonly method?: string }
            assert.deepStrictEqual({ tag: error._tag, method: error.method }, {
              tag: "StoreError",
              method: "transaction"
            })
            assert.deepStrictEqual(yield* counts(tables, key), { orders: 0, records: 0, status: null })
          }))
        return
      }

      it.effect("a success writes the user's items and the record together; a retry replays without planning", () =>
        Effect.gen(function*() {
          const plans = yield* Ref.make(0)
          const op = operation(
            "tx-success",
            (order) => Effect.zipLeft(orderWrite(tables.orders, order.sku), Ref.update(plans, (n) => n + 1))
          )
          const key = randomUUID()
          const first = yield* op.runDetailed({ key, payload })
          assert.isFalse(first.replayed)
          assert.deepStrictEqual(yield* counts(tables, key), { orders: 1, records: 1, status: "COMPLETED" })
          const retry = yield* op.runDetailed({ key, payload })
          assert.isTrue(retry.replayed)
          assert.deepStrictEqual(retry.value, first.value)
          assert.strictEqual(yield* Ref.get(plans), 1)
          assert.deepStrictEqual(yield* counts(tables, key), { orders: 1, records: 1, status: "COMPLETED" })
        }))

      it.effect("a stored failure writes the record without the user's items, and replays", () =>
        Effect.gen(function*() {
          const op = operation(
            "tx-stored-failure",
            (order) =>
              Effect.zipRight(orderWrite(tables.orders, order.sku), Effect.fail(new OutOfStock({ sku: order.sku })))
          )
          const key = randomUUID()
          assert.instanceOf(failureOf(yield* Effect.exit(op.run({ key, payload }))), OutOfStock)
          assert.deepStrictEqual(yield* counts(tables, key), { orders: 0, records: 1, status: "COMPLETED" })
          assert.instanceOf(failureOf(yield* Effect.exit(op.run({ key, payload }))), OutOfStock)
        }))

      it.effect("markFailed writes a FAILED record; a retry takes it over and executes once", () =>
        Effect.gen(function*() {
          const plans = yield* Ref.make(0)
          const op = operation(
            "tx-mark-failed",
            (order) =>
              Effect.flatMap(
                Ref.updateAndGet(plans, (n) => n + 1),
                (n) => n === 1 ? Effect.fail(new OutOfStock({ sku: order.sku })) : orderWrite(tables.orders, order.sku)
              ),
            { onFailure: () => "markFailed" }
          )
          const key = randomUUID()
          assert.instanceOf(failureOf(yield* Effect.exit(op.run({ key, payload }))), OutOfStock)
          assert.deepStrictEqual(yield* counts(tables, key), { orders: 0, records: 1, status: "FAILED" })
          const retry = yield* op.runDetailed({ key, payload })
          assert.deepStrictEqual({ replayed: retry.replayed, attempt: retry.attempt }, { replayed: false, attempt: 2 })
          assert.deepStrictEqual(yield* counts(tables, key), { orders: 1, records: 1, status: "COMPLETED" })
        }))

      const nothingWritten = (
        name: string,
        plan: (order: typeof NewOrder.Type) => Effect.Effect<
          DynamoDbTransactional.Plan<typeof Order.Type>,
          OutOfStock,
          IdempotencyContext.IdempotencyContext
        >,
        check: (exit: Exit.Exit<typeof Order.Type, unknown>) => void,
        options?: { readonly timeout?: Duration.DurationInput; readonly onFailure?: () => "release" }
      ) =>
        it.effect(`${name}: nothing is written; a retry executes once`, () =>
          Effect.gen(function*() {
            const key = randomUUID()
            const opName = `tx-${name.replaceAll(" ", "-")}`
            check(yield* Effect.exit(operation(opName, plan, options).run({ key, payload })))
            assert.deepStrictEqual(yield* counts(tables, key), { orders: 0, records: 0, status: null })
            const retry = yield* operation(opName, (order) => orderWrite(tables.orders, order.sku)).runDetailed({
              key,
              payload
            })
            assert.isFalse(retry.replayed)
            assert.deepStrictEqual(yield* counts(tables, key), { orders: 1, records: 1, status: "COMPLETED" })
          }))

      nothingWritten(
        "a failure the policy releases",
        (order) => Effect.fail(new OutOfStock({ sku: order.sku })),
        (exit) => assert.instanceOf(failureOf(exit), OutOfStock),
        { onFailure: () => "release" }
      )

      nothingWritten(
        "a defect",
        () => Effect.dieMessage("boom"),
        (exit) => assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause))
      )

      nothingWritten(
        "a timeout",
        () => Effect.never,
        (exit) => {
          const error = failureOf(exit) as { readonly _tag: string; readonly rolledBack?: boolean }
          assert.deepStrictEqual({ tag: error._tag, rolledBack: error.rolledBack }, {
            tag: "DownstreamTimeout",
            rolledBack: true
          })
        },
        { timeout: "300 millis" }
      )

      nothingWritten(
        "a write whose condition fails",
        (order) =>
          Effect.map(orderWrite(tables.orders, order.sku), (plan) => ({
            ...plan,
            writes: [
              ...plan.writes,
              {
                ConditionCheck: {
                  TableName: tables.orders,
                  Key: { id: { S: "no-such-order" } },
                  ConditionExpression: "attribute_exists(id)"
                }
              }
            ]
          })),
        (exit) => {
          const error = failureOf(exit)
          assert.instanceOf(error, DynamoDbTransactional.WritesRejected)
          assert.deepStrictEqual({ reason: error.reason, index: error.index }, { reason: "ConditionFailed", index: 1 })
        }
      )

      it.effect("more writes than a transaction takes: WritesRejected before anything is sent", () =>
        Effect.gen(function*() {
          const key = randomUUID()
          const op = operation("tx-too-many", (order) =>
            Effect.map(orderWrite(tables.orders, order.sku), (plan) => ({
              ...plan,
              writes: Array.from({ length: DynamoDbTransactional.maxWrites + 1 }, () => plan.writes[0]!)
            })))
          const error = failureOf(yield* Effect.exit(op.run({ key, payload })))
          assert.instanceOf(error, DynamoDbTransactional.WritesRejected)
          assert.strictEqual(error.reason, "TooManyWrites")
          assert.deepStrictEqual(yield* counts(tables, key), { orders: 0, records: 0, status: null })
        }))

      it.scoped("a write on the record's own item: WritesRejected (RecordKey) before the transaction is sent", () =>
        Effect.gen(function*() {
          const requests = yield* recordRequests
          const onRecord = (write: (id: string) => TransactWriteItem) =>
            operation(
              "tx-record-key",
              (order) =>
                Effect.flatMap(IdempotencyContext.IdempotencyContext, (context) =>
                  Effect.map(orderWrite(tables.orders, order.sku), (plan) => ({
                    ...plan,
                    writes: [...plan.writes, write(context.id.value)]
                  })))
            )
          const item = (id: string) => ({ id: { S: id } })
          const writes: ReadonlyArray<(id: string) => TransactWriteItem> = [
            (id) => ({ Put: { TableName: tables.records, Item: { ...item(id), note: { S: "mine" } } } }),
            (id) => ({
              Update: {
                TableName: `arn:aws:dynamodb:us-east-1:000000000000:table/${tables.records}`,
                Key: item(id),
                UpdateExpression: "SET note = :n",
                ExpressionAttributeValues: { ":n": { S: "mine" } }
              }
            }),
            (id) => ({ Delete: { TableName: tables.records, Key: item(id) } }),
            (id) => ({
              ConditionCheck: { TableName: tables.records, Key: item(id), ConditionExpression: "attribute_exists(id)" }
            })
          ]
          for (const write of writes) {
            const key = randomUUID()
            yield* requests.take
            const error = failureOf(yield* Effect.exit(onRecord(write).run({ key, payload })))
            assert.instanceOf(error, DynamoDbTransactional.WritesRejected)
            assert.deepStrictEqual({ reason: error.reason, index: error.index }, { reason: "RecordKey", index: 1 })
            assert.include(error.message, "record's own item")
            // the record was read, and nothing was sent after it
            assert.deepStrictEqual(yield* requests.take, ["GetItem"])
            assert.deepStrictEqual(yield* counts(tables, key), { orders: 0, records: 0, status: null })
          }
          // another item of the records table is the plan's to write
          const key = randomUUID()
          const other = yield* onRecord((id) => ({
            Put: { TableName: tables.records, Item: { ...item(`${id}-other`), note: { S: "mine" } } }
          })).run({ key, payload })
          assert.isString(other.orderId)
          const { orders, records } = yield* counts(tables, key)
          assert.deepStrictEqual({ orders, records }, { orders: 1, records: 2 })
          const id = IdempotencyRecord.makeRecordId({ operation: "tx-record-key", key: IdempotencyKey.unsafeMake(key) })
          const record = yield* (yield* IdempotencyStore.IdempotencyStore).get(id)
          assert.isTrue(Option.isSome(record) && record.value.status === "COMPLETED")
        }))

      it.effect(`${RACE} concurrent runs of one key: one applied transaction, every other replays it`, () =>
        Effect.gen(function*() {
          // a run whose transaction lost the race reads the winner's record and replays it
          const op = operation("tx-race", (order) => orderWrite(tables.orders, order.sku))
          const key = randomUUID()
          const results = yield* Effect.all(
            Array.from({ length: RACE }, () => Effect.either(op.runDetailed({ key, payload }))),
            { concurrency: "unbounded" }
          )
          const values = results.flatMap((result) => result._tag === "Right" ? [result.right] : [])
          const errors = results.flatMap((result) => result._tag === "Left" ? [result.left._tag] : [])
          // a run that lost three rounds in a row answers IdempotencyConflict: it never writes
          for (const error of errors) assert.strictEqual(error, "IdempotencyConflict")
          assert.strictEqual(values.filter((result) => !result.replayed).length, 1)
          for (const result of values) assert.deepStrictEqual(result.value, values[0]!.value)
          assert.deepStrictEqual(yield* counts(tables, key), { orders: 1, records: 1, status: "COMPLETED" })
        }))

      it.effect("a record of this mode replays in the normal mode, and the other way round", () =>
        Effect.gen(function*() {
          const normal = (name: string) =>
            Idempotency.make({
              name,
              payload: NewOrder,
              success: Order,
              execute: () => Effect.succeed({ orderId: "normal" })
            })
          const key = randomUUID()
          const written = yield* operation("tx-cross", (order) => orderWrite(tables.orders, order.sku)).run({
            key,
            payload
          })
          const replayedByNormal = yield* normal("tx-cross").runDetailed({ key, payload })
          assert.deepStrictEqual({ replayed: replayedByNormal.replayed, value: replayedByNormal.value }, {
            replayed: true,
            value: written
          })

          const other = randomUUID()
          yield* normal("tx-cross-back").run({ key: other, payload })
          const replayedByTx = yield* operation("tx-cross-back", (order) => orderWrite(tables.orders, order.sku))
            .runDetailed({ key: other, payload })
          assert.deepStrictEqual({ replayed: replayedByTx.replayed, value: replayedByTx.value }, {
            replayed: true,
            value: { orderId: "normal" }
          })
          assert.deepStrictEqual((yield* counts(tables, other)).orders, 0)
        }))

      it.effect("a normal-mode attempt in progress gives IdempotencyConflict, and nothing is planned", () =>
        Effect.gen(function*() {
          const started = yield* Deferred.make<void>()
          const release = yield* Deferred.make<void>()
          const key = randomUUID()
          const holder = Idempotency.make({
            name: "tx-in-progress",
            payload: NewOrder,
            success: Order,
            execute: () =>
              Effect.zipRight(
                Deferred.succeed(started, undefined),
                Effect.as(Deferred.await(release), { orderId: "n" })
              )
          })
          const fiber = yield* Effect.fork(holder.run({ key, payload }))
          yield* Deferred.await(started)
          const plans = yield* Ref.make(0)
          const op = operation(
            "tx-in-progress",
            (order) => Effect.zipLeft(orderWrite(tables.orders, order.sku), Ref.update(plans, (n) => n + 1))
          )
          const error = failureOf(yield* Effect.exit(op.run({ key, payload }))) as { readonly _tag: string }
          assert.strictEqual(error._tag, "IdempotencyConflict")
          assert.strictEqual(yield* Ref.get(plans), 0)
          yield* Deferred.succeed(release, undefined)
          yield* Fiber.join(fiber)
          const replayed = yield* op.runDetailed({ key, payload })
          assert.isTrue(replayed.replayed)
        }))

      it.effect("a normal-mode record left in progress past its lease (a crash) is taken over: attempt 2", () =>
        Effect.gen(function*() {
          const key = randomUUID()
          yield* leftInProgress("tx-takeover", key, true)
          const op = operation("tx-takeover", (order) => orderWrite(tables.orders, order.sku))
          const live = failureOf(yield* Effect.exit(op.run({ key, payload }))) as { readonly _tag: string }
          assert.strictEqual(live._tag, "IdempotencyConflict")
          yield* Effect.sleep("400 millis")
          const result = yield* op.runDetailed({ key, payload })
          assert.deepStrictEqual({ replayed: result.replayed, attempt: result.attempt }, {
            replayed: false,
            attempt: 2
          })
          assert.deepStrictEqual(yield* counts(tables, key), { orders: 1, records: 1, status: "COMPLETED" })
        }))

      it.effect("a normal-mode record left in progress past its lease, under onTimeout markUnknown: not taken over", () =>
        Effect.gen(function*() {
          const store = yield* IdempotencyStore.IdempotencyStore
          const key = randomUUID()
          const id = yield* leftInProgress("tx-left-unknown", key, false)
          const plans = yield* Ref.make(0)
          const op = operation(
            "tx-left-unknown",
            (order) => Effect.zipLeft(orderWrite(tables.orders, order.sku), Ref.update(plans, (n) => n + 1)),
            { onTimeout: "markUnknown" }
          )
          yield* Effect.sleep("400 millis")
          // as the normal mode does under markUnknown: the outcome is unknown, nothing runs
          const error = failureOf(yield* Effect.exit(op.run({ key, payload }))) as {
            readonly _tag: string
            readonly replayed?: boolean
          }
          assert.deepStrictEqual({ tag: error._tag, replayed: error.replayed }, {
            tag: "DownstreamTimeout",
            replayed: true
          })
          assert.strictEqual(yield* Ref.get(plans), 0)
          const record = yield* store.get(id)
          assert.isTrue(Option.isSome(record) && record.value.status === "IN_PROGRESS")
        }))

      it.scoped("a transaction whose answer is lost: StoreUnavailable by callTimeout; a retry replays it", () =>
        Effect.gen(function*() {
          const endpoint = new URL(backend.endpoint)
          const proxy = yield* TcpProxy.make({ host: endpoint.hostname, port: Number(endpoint.port) })
          const proxied = yield* Layer.build(DynamoDbClient.layer(clientConfig(`http://127.0.0.1:${proxy.port}`)))
          const plans = yield* Ref.make(0)
          const op = DynamoDbTransactional.make({
            name: "tx-answer-lost",
            table: { tableName: tables.records, requestTimeout: "200 millis", callTimeout: "700 millis" },
            payload: NewOrder,
            success: Order,
            plan: (order) => Effect.zipLeft(orderWrite(tables.orders, order.sku), Ref.update(plans, (n) => n + 1))
          })
          const key = randomUUID()
          yield* proxy.stall({ hold: "answers", when: (bytes) => Buffer.from(bytes).includes("TransactWriteItems") })
          const lost = yield* Effect.exit(Effect.provide(op.run({ key, payload }), proxied))
          const error = failureOf(lost) as { readonly _tag: string; readonly method?: string }
          assert.deepStrictEqual({ tag: error._tag, method: error.method }, {
            tag: "StoreUnavailable",
            method: "transaction"
          })
          yield* proxy.resume
          const retry = yield* Effect.provide(op.runDetailed({ key, payload }), proxied)
          assert.isTrue(retry.replayed)
          assert.strictEqual(yield* Ref.get(plans), 1)
          assert.deepStrictEqual(yield* counts(tables, key), { orders: 1, records: 1, status: "COMPLETED" })
        }))

      it.effect("the normal mode's store sees the record as its own", () =>
        Effect.gen(function*() {
          const key = randomUUID()
          yield* operation("tx-store-view", (order) => orderWrite(tables.orders, order.sku)).run({ key, payload })
          const store = yield* IdempotencyStore.IdempotencyStore
          const id = IdempotencyRecord.makeRecordId({ operation: "tx-store-view", key: IdempotencyKey.unsafeMake(key) })
          const record = yield* store.get(id)
          assert.isTrue(Option.isSome(record) && record.value.status === "COMPLETED" && record.value.attempt === 1)
        }))
    }
  )
}

for (const backend of backends) suite(backend)
