/**
 * SQS batches on the memory store: a partial batch response with the failed records only, a record
 * whose body does not decode, a duplicate delivery in one batch, a record already processed counted
 * as done, FIFO order (the first failure fails every record after it), and the fingerprint of the
 * decoded body (a message re-sent laid out differently replays).
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { LambdaSqs, LambdaTest } from "@effect-idempotency/lambda"
import { assert, describe } from "@effect/vitest"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Schema from "effect/Schema"
import { dispose, invoke, liveTest, OneWay } from "./utils/LambdaRunner.js"

class Unavailable extends Data.TaggedError("Unavailable")<{}> {}

class Declined extends Schema.TaggedError<Declined>()("Declined", { reason: Schema.String }) {}

const Charge = Schema.parseJson(Schema.Struct({ chargeId: Schema.String, cents: Schema.Int }))

const consumer = (
  options: {
    readonly fifo?: boolean
    readonly failing?: ReadonlySet<string>
    /** Charges whose handler dies. */
    readonly dying?: ReadonlySet<string>
    /** How long a charge takes. Default: none. */
    readonly millis?: number
  } = {}
) => {
  const charged: Array<string> = []
  const handler = LambdaSqs.batch({
    name: "charge",
    layer: IdempotencyStore.layerMemoryWith({ warn: false }),
    body: Charge,
    key: (charge) => charge.chargeId,
    fifo: options.fifo ?? false,
    handler: (charge) =>
      options.failing?.has(charge.chargeId) === true
        ? Effect.fail(new Unavailable())
        : options.dying?.has(charge.chargeId) === true
        ? Effect.die("the parser failed")
        : Effect.zipRight(
          Effect.sleep(Duration.millis(options.millis ?? 0)),
          Effect.sync(() => void charged.push(charge.chargeId))
        )
  })
  return { charged, handler }
}

/** A memory store, and the failures a consumer logs as it sends records back to the queue. */
const logged = () => {
  const failures: Array<{ readonly _tag: unknown; readonly message: unknown }> = []
  const logger = Logger.make(({ message }) => {
    for (const part of Array.isArray(message) ? message : [message]) {
      if (typeof part === "object" && part !== null && "_tag" in part) failures.push(part)
    }
  })
  const layer = Layer.merge(
    IdempotencyStore.layerMemoryWith({ warn: false }),
    Logger.replace(Logger.defaultLogger, logger)
  )
  return { failures, layer }
}

const record = (id: string, chargeId: string) =>
  LambdaTest.sqsRecord({ messageId: id, body: JSON.stringify({ chargeId, cents: 100 }) })

describe("LambdaSqs.batch", () => {
  liveTest("answers with the failed records only; a redelivered record is replayed, not charged again", function*() {
    const { charged, handler } = consumer({ failing: new Set(["c-2"]) })
    const first = yield* invoke(handler, {
      Records: [
        record("m-1", "c-1"),
        record("m-2", "c-2"),
        LambdaTest.sqsRecord({ messageId: "m-3", body: "not json" })
      ]
    }, "3 seconds")
    assert.deepStrictEqual(first._tag === "Ok" && first.value, {
      batchItemFailures: [{ itemIdentifier: "m-2" }, { itemIdentifier: "m-3" }]
    })
    const again = yield* invoke(handler, { Records: [record("m-1", "c-1"), record("m-4", "c-4")] }, "3 seconds")
    assert.deepStrictEqual(again._tag === "Ok" && again.value, { batchItemFailures: [] })
    assert.deepStrictEqual(charged, ["c-1", "c-4"])
    yield* dispose(handler)
  })

  liveTest("a duplicate delivery in one batch is charged once", function*() {
    const { charged, handler } = consumer()
    yield* invoke(handler, { Records: [record("m-1", "c-1"), record("m-1", "c-1")] }, "3 seconds")
    assert.deepStrictEqual(charged, ["c-1"])
    yield* dispose(handler)
  })

  liveTest(
    "a duplicate in one batch waits for the first copy and replays it, instead of going back as a conflict",
    function*() {
      const { charged, handler } = consumer({ millis: 300 })
      const result = yield* invoke(handler, {
        Records: [record("m-1", "c-1"), record("m-2", "c-2"), record("m-3", "c-1"), record("m-1", "c-1")]
      }, "3 seconds")
      assert.deepStrictEqual(result._tag === "Ok" && result.value, { batchItemFailures: [] })
      assert.deepStrictEqual(charged.sort(), ["c-1", "c-2"])
      yield* dispose(handler)
    }
  )

  liveTest("fifo: records run in order, and the first failure fails every record after it", function*() {
    const { charged, handler } = consumer({ fifo: true, failing: new Set(["c-2"]) })
    const result = yield* invoke(handler, {
      Records: [record("m-1", "c-1"), record("m-2", "c-2"), record("m-3", "c-3")]
    }, "3 seconds")
    assert.deepStrictEqual(result._tag === "Ok" && result.value, {
      batchItemFailures: [{ itemIdentifier: "m-2" }, { itemIdentifier: "m-3" }]
    })
    assert.deepStrictEqual(charged, ["c-1"])
    yield* dispose(handler)
  })

  liveTest("a record's defect fails that record only: the others run to their end and are recorded", function*() {
    const { charged, handler } = consumer({ dying: new Set(["c-1"]), millis: 200 })
    const first = yield* invoke(handler, {
      Records: [record("m-1", "c-1"), record("m-2", "c-2"), record("m-3", "c-3")]
    }, "3 seconds")
    assert.deepStrictEqual(first._tag === "Ok" && first.value, { batchItemFailures: [{ itemIdentifier: "m-1" }] })
    // the records charged were recorded: their redelivery is replayed, not refused as in progress
    const again = yield* invoke(handler, { Records: [record("m-2", "c-2"), record("m-3", "c-3")] }, "3 seconds")
    assert.deepStrictEqual(again._tag === "Ok" && again.value, { batchItemFailures: [] })
    assert.deepStrictEqual(charged.sort(), ["c-2", "c-3"])
    yield* dispose(handler)
  })

  liveTest("a failure schema records a rejection: its redelivery fails again without running the handler", function*() {
    let runs = 0
    const handler = LambdaSqs.batch({
      name: "charge",
      layer: IdempotencyStore.layerMemoryWith({ warn: false }),
      body: Charge,
      key: (charge) => charge.chargeId,
      failure: Declined,
      handler: () => Effect.suspend(() => (runs++, Effect.fail(new Declined({ reason: "card declined" }))))
    })
    const first = yield* invoke(handler, { Records: [record("m-1", "c-1")] }, "3 seconds")
    const again = yield* invoke(handler, { Records: [record("m-1", "c-1")] }, "3 seconds")
    for (const invocation of [first, again]) {
      assert.deepStrictEqual(invocation._tag === "Ok" && invocation.value, {
        batchItemFailures: [{ itemIdentifier: "m-1" }]
      })
    }
    assert.strictEqual(runs, 1)
    yield* dispose(handler)
  })

  liveTest(
    "a redelivery with its members in another order and other whitespace is replayed; another value is KeyReused",
    function*() {
      const { failures, layer } = logged()
      const charged: Array<string> = []
      const handler = LambdaSqs.batch({
        name: "charge",
        layer,
        body: Charge,
        key: (charge) => charge.chargeId,
        handler: (charge) => Effect.sync(() => void charged.push(charge.chargeId))
      })
      const first = yield* invoke(handler, { Records: [record("m-1", "c-1")] }, "3 seconds")
      const resent = LambdaTest.sqsRecord({
        messageId: "m-2",
        body: "{\n  \"cents\": 100,\n  \"chargeId\": \"c-1\"\n}"
      })
      const again = yield* invoke(handler, { Records: [resent] }, "3 seconds")
      for (const invocation of [first, again]) {
        assert.deepStrictEqual(invocation._tag === "Ok" && invocation.value, { batchItemFailures: [] })
      }
      const other = LambdaTest.sqsRecord({ messageId: "m-3", body: "{ \"cents\": 200, \"chargeId\": \"c-1\" }" })
      const reused = yield* invoke(handler, { Records: [other] }, "3 seconds")
      assert.deepStrictEqual(reused._tag === "Ok" && reused.value, { batchItemFailures: [{ itemIdentifier: "m-3" }] })
      assert.deepStrictEqual(failures.map((failure) => failure._tag), ["KeyReused"])
      assert.deepStrictEqual(charged, ["c-1"])
      yield* dispose(handler)
    }
  )

  liveTest("a body that does not encode back for its fingerprint is InvalidEvent, without its contents", function*() {
    const { failures, layer } = logged()
    let runs = 0
    // a body schema whose encoding refuses what its decoding accepted: OneWay
    const handler = LambdaSqs.batch({
      name: "charge",
      layer,
      body: OneWay,
      handler: () => Effect.sync(() => void runs++)
    })
    const result = yield* invoke(handler, {
      Records: [LambdaTest.sqsRecord({ messageId: "m-1", body: "sk_live_x" })]
    }, "3 seconds")
    assert.deepStrictEqual(result._tag === "Ok" && result.value, { batchItemFailures: [{ itemIdentifier: "m-1" }] })
    assert.deepStrictEqual(failures.map((failure) => failure._tag), ["InvalidEvent"])
    assert.notInclude(String(failures[0]?.message), "sk_live")
    assert.strictEqual(runs, 0)
    yield* dispose(handler)
  })
})
