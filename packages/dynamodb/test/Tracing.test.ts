import { IdempotencyKey, IdempotencyRecord } from "@effect-idempotency/core"
import * as StoreSpans from "@effect-idempotency/test-support/StoreSpans"
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import { callEveryMethod, conditionFailed, item, scriptedStore, succeed } from "./utils/scripted.js"

const id = IdempotencyRecord.makeRecordId({ operation: "tracing", key: IdempotencyKey.unsafeMake("key-1") })
const token = "token-1"

const { recording } = StoreSpans

describe("tracing", () => {
  it.effect("every store method is one span, a child of the caller's, named and tagged with the table", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1000)
      const { spans, tracer } = yield* recording
      const { store } = yield* scriptedStore((sent, n) =>
        // the second reservation meets a live record
        n === 2
          ? Promise.reject(conditionFailed(item(id, { status: "IN_PROGRESS", token: "other" })))
          : succeed(sent), { tableName: "traced" })
      const reserve = {
        id,
        token,
        fingerprint: "sha256:x",
        lease: Duration.seconds(30),
        ttl: Duration.hours(1),
        takeover: true
      }
      yield* callEveryMethod(store, reserve, { ...reserve, token: "token-2" }).pipe(
        Effect.withSpan("caller"),
        Effect.withTracer(tracer)
      )
      const names = ["reserve", "reserve", "complete", "markFailed", "extend", "release", "get", "purgeExpired"]
      assert.deepStrictEqual(spans.map(({ span }) => span.name), ["caller", ...names.map((m) => `DynamoDbStore.${m}`)])
      for (const { parent, span } of spans.slice(1)) {
        assert.strictEqual(parent, "caller", span.name)
        assert.strictEqual(span.attributes.get("db.system"), "dynamodb", span.name)
        assert.deepStrictEqual(span.attributes.get("aws.dynamodb.table_names"), ["traced"], span.name)
        assert.strictEqual(span.status._tag, "Ended", span.name)
      }
    }))
})
