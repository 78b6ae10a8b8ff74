/**
 * The test kit for deployed functions, against the real adapters on the memory store: the events it
 * builds are the ones the adapters read (SQS batches, REST and HTTP API requests), its context runs
 * down on the wall clock, and `invoke` answers with the handler's value, its rejection, or Lambda's
 * cut-off at the context's time, even under `TestClock`.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import {
  LambdaError,
  LambdaEvent,
  LambdaHttp,
  LambdaInvocation,
  LambdaSqs,
  LambdaTest
} from "@effect-idempotency/lambda"
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { createHash } from "node:crypto"

const disposed = <H extends { readonly dispose: () => Promise<void> }>(handler: H) =>
  Effect.acquireRelease(Effect.succeed(handler), (handler) => Effect.promise(() => handler.dispose()))

class Refused extends Schema.TaggedError<Refused>()("Refused", { reason: Schema.String }) {}

/** A shipping function: its runs counted, its answer the time the invocation had left. */
const shipping = (options: { readonly slow?: Duration.DurationInput } = {}) => {
  const runs: Array<string> = []
  const handler = LambdaEvent.idempotent({
    name: "ship-order",
    layer: IdempotencyStore.layerMemoryWith({ warn: false }),
    event: Schema.Struct({ orderId: Schema.String, items: Schema.Int }),
    key: (event) => event.orderId,
    success: Schema.Struct({ trackingId: Schema.String, remainingMillis: Schema.Number }),
    failure: Refused,
    handler: (event) =>
      Effect.gen(function*() {
        runs.push(event.orderId)
        if (event.items > 100) return yield* new Refused({ reason: "too many items" })
        // a downstream call that cannot be stopped once sent
        if (options.slow !== undefined) yield* Effect.uninterruptible(Effect.sleep(options.slow))
        const remaining = yield* LambdaInvocation.remaining
        return { trackingId: `track-${event.orderId}`, remainingMillis: Duration.toMillis(remaining) }
      })
  })
  return { runs, handler }
}

describe("LambdaTest.context", () => {
  it.scopedLive("runs down on the wall clock from `remaining`; the adapter reads it, and the request id", () =>
    Effect.gen(function*() {
      const context = LambdaTest.context({ remaining: "2 seconds", functionName: "ship-order", awsRequestId: "req-1" })
      const first = context.getRemainingTimeInMillis()
      assert.isTrue(first <= 2000 && first >= 1950, `${first}`)
      yield* Effect.sleep("300 millis")
      const later = context.getRemainingTimeInMillis()
      assert.isTrue(later <= first - 290 && later >= first - 450, `${first} then ${later}`)
      assert.strictEqual(context.functionName, "ship-order")
      assert.strictEqual(context.awsRequestId, "req-1")
      assert.strictEqual(context.invokedFunctionArn, "arn:aws:lambda:us-east-1:123456789012:function:ship-order")
      assert.strictEqual(LambdaTest.context({ remaining: 0 }).getRemainingTimeInMillis(), 0)
      assert.notStrictEqual(
        LambdaTest.context({ remaining: 0 }).awsRequestId,
        LambdaTest.context({ remaining: 0 }).awsRequestId
      )

      // a key read from the context: the same request id is the same invocation, retried
      let runs = 0
      const handler = yield* disposed(LambdaEvent.idempotent({
        name: "by-request",
        layer: IdempotencyStore.layerMemoryWith({ warn: false }),
        event: Schema.Unknown,
        key: (_, context) => context.awsRequestId,
        success: Schema.Struct({ run: Schema.Number, remainingMillis: Schema.Number }),
        handler: () =>
          Effect.map(LambdaInvocation.remaining, (remaining) => ({
            run: ++runs,
            remainingMillis: Duration.toMillis(remaining)
          }))
      }))
      const answer = yield* Effect.promise(() =>
        handler({}, LambdaTest.context({ remaining: "2 seconds", awsRequestId: "req-1" }))
      )
      // the handler saw the time the context gave, less the cold start
      assert.isTrue(answer.remainingMillis <= 2000 && answer.remainingMillis > 1500, `${answer.remainingMillis}`)
      const again = yield* Effect.promise(() =>
        handler({}, LambdaTest.context({ remaining: "2 seconds", awsRequestId: "req-1" }))
      )
      const other = yield* Effect.promise(() => handler({}, LambdaTest.context({ remaining: "2 seconds" })))
      assert.deepStrictEqual([answer.run, again.run, other.run], [1, 1, 2])
    }))
})

describe("LambdaTest.invoke", () => {
  it.scopedLive("the handler's value, typed; a retry gets the recorded one without running it", () =>
    Effect.gen(function*() {
      const { handler, runs } = shipping()
      yield* disposed(handler)
      const event = { orderId: "o-1", items: 2 }
      const first = yield* LambdaTest.invoke(handler, event, { remaining: "5 seconds" })
      const retry = yield* LambdaTest.invoke(handler, event)
      assert.strictEqual(first.trackingId, "track-o-1")
      assert.deepStrictEqual(retry, first)
      assert.deepStrictEqual(runs, ["o-1"])
    }))

  it.scopedLive("a rejection is InvocationFailed carrying the error Lambda would report", () =>
    Effect.gen(function*() {
      const { handler, runs } = shipping()
      yield* disposed(handler)
      const invalid = yield* Effect.flip(LambdaTest.invoke(handler, { orderId: 42 }))
      assert.instanceOf(invalid, LambdaTest.InvocationFailed)
      assert.instanceOf(invalid.cause, LambdaError.InvalidEvent)
      assert.match(invalid.message, /^The invocation failed: Invalid event: /)

      // a stored failure is rejected again on the retry, without running the handler
      const refused = yield* Effect.flip(LambdaTest.invoke(handler, { orderId: "o-2", items: 500 }))
      const again = yield* Effect.flip(LambdaTest.invoke(handler, { orderId: "o-2", items: 500 }))
      for (const failure of [refused, again]) {
        assert.strictEqual(failure._tag, "InvocationFailed")
        assert.strictEqual(failure._tag === "InvocationFailed" && (failure.cause as Refused).reason, "too many items")
      }
      assert.deepStrictEqual(runs, ["o-2"])

      // a handler of your own that throws, before any promise
      const throwing = (_event: unknown): Promise<string> => {
        throw new Error("boom")
      }
      const thrown = yield* Effect.flip(LambdaTest.invoke(throwing, {}))
      assert.strictEqual(thrown._tag === "InvocationFailed" && (thrown.cause as Error).message, "boom")
    }))

  it.scopedLive(
    "past the context's time, InvocationTimedOut at that time; a call that cannot be stopped keeps its lease until it ends",
    () =>
      Effect.gen(function*() {
        // the downstream call takes 1.2 s and cannot be stopped: the adapter answers at Lambda's cut-off
        // at 600 ms; the attempt keeps the lease until the call has ended
        const { handler, runs } = shipping({ slow: "1200 millis" })
        yield* disposed(handler)
        yield* Effect.promise(() => handler.ready())
        const event = { orderId: "o-3", items: 1 }
        const [elapsed, timedOut] = yield* Effect.timed(
          Effect.flip(LambdaTest.invoke(handler, event, { remaining: "600 millis" }))
        )
        assert.deepStrictEqual(timedOut, new LambdaTest.InvocationTimedOut({ timeoutMillis: 600 }))
        const millis = Duration.toMillis(elapsed)
        assert.isTrue(millis >= 590 && millis < 900, `${millis} ms`)
        // Lambda's retry while the call still runs: a conflict, the downstream not called beside it
        const conflict = yield* Effect.flip(LambdaTest.invoke(handler, event, { remaining: "3 seconds" }))
        assert.strictEqual(conflict._tag, "InvocationFailed")
        assert.deepStrictEqual(runs, ["o-3"])
      }),
    10_000
  )

  it.effect("cuts off on the wall clock, whatever the test's clock: it never hangs under TestClock", () =>
    Effect.gen(function*() {
      const never = (_event: unknown): Promise<never> => new Promise<never>(() => {})
      const timedOut = yield* Effect.flip(LambdaTest.invoke(never, {}, { remaining: "200 millis" }))
      assert.strictEqual(timedOut._tag, "InvocationTimedOut")
      assert.strictEqual(timedOut.message, "The invocation did not end within the function's timeout of 200 ms")
    }))
})

describe("LambdaTest.sqsEvent and sqsRecord", () => {
  it.scopedLive("a batch through LambdaSqs.batch: the failed records only; a redelivery is replayed", () =>
    Effect.gen(function*() {
      const seen: Array<{ readonly messageId: string; readonly receiveCount: string; readonly md5: string }> = []
      const handler = yield* disposed(LambdaSqs.batch({
        name: "charge",
        layer: IdempotencyStore.layerMemoryWith({ warn: false }),
        body: Schema.parseJson(Schema.Struct({ chargeId: Schema.String, cents: Schema.Int })),
        handler: (_, record) =>
          Effect.sync(() =>
            void seen.push({
              messageId: record.messageId,
              receiveCount: record.attributes.ApproximateReceiveCount,
              md5: record.md5OfBody
            })
          )
      }))
      const body = JSON.stringify({ chargeId: "c-1", cents: 100 })
      const first = yield* LambdaTest.invoke(
        handler,
        LambdaTest.sqsEvent([
          LambdaTest.sqsRecord({ messageId: "m-1", body }),
          LambdaTest.sqsRecord({ messageId: "m-2", body: "not json" })
        ])
      )
      assert.deepStrictEqual(first, { batchItemFailures: [{ itemIdentifier: "m-2" }] })
      // m-1 again after a visibility timeout (keyed by its message id): replayed, not charged again
      const redelivered = LambdaTest.sqsRecord({ messageId: "m-1", body, receiveCount: 2 })
      assert.strictEqual(redelivered.attributes.ApproximateReceiveCount, "2")
      const second = yield* LambdaTest.invoke(handler, LambdaTest.sqsEvent([redelivered]))
      assert.deepStrictEqual(second, { batchItemFailures: [] })
      assert.deepStrictEqual(seen, [
        { messageId: "m-1", receiveCount: "1", md5: createHash("md5").update(body).digest("hex") }
      ])

      const fifo = LambdaTest.sqsRecord({
        messageId: "m-3",
        body,
        attributes: { MessageGroupId: "customer-1" },
        eventSourceARN: "arn:aws:sqs:us-east-1:123456789012:charges.fifo"
      })
      assert.strictEqual(fifo.attributes.MessageGroupId, "customer-1")
      assert.strictEqual(fifo.attributes.ApproximateReceiveCount, "1")
      assert.strictEqual(fifo.eventSourceARN, "arn:aws:sqs:us-east-1:123456789012:charges.fifo")
    }))
})

describe("LambdaTest.restApiEvent and httpApiEvent", () => {
  it("carry what the adapter reads, in each payload version's shape", () => {
    const rest = LambdaTest.restApiEvent({
      method: "post",
      path: "/orders/42?tag=a&tag=b",
      route: "/orders/{id}",
      pathParameters: { id: "42" },
      headers: { "Content-Type": "application/json", "User-Agent": "curl/8" },
      cookies: ["session=abc", "theme=dark"],
      body: "{}"
    })
    assert.strictEqual(rest.httpMethod, "POST")
    assert.strictEqual(rest.path, "/orders/42")
    assert.strictEqual(rest.resource, "/orders/{id}")
    assert.deepStrictEqual(rest.pathParameters, { id: "42" })
    assert.deepStrictEqual(rest.queryStringParameters, { tag: "b" })
    assert.deepStrictEqual(rest.multiValueQueryStringParameters, { tag: ["a", "b"] })
    assert.strictEqual(rest.headers.Cookie, "session=abc; theme=dark")
    assert.deepStrictEqual(rest.multiValueHeaders["Content-Type"], ["application/json"])
    assert.strictEqual(rest.requestContext.identity.userAgent, "curl/8")
    assert.deepStrictEqual([rest.body, rest.isBase64Encoded], ["{}", false])

    const http = LambdaTest.httpApiEvent({
      method: "PUT",
      path: "/images/1?size=small",
      headers: { "Content-Type": "image/png" },
      cookies: ["session=abc"],
      body: new Uint8Array([0, 255, 1])
    })
    assert.strictEqual(http.version, "2.0")
    assert.strictEqual(http.routeKey, "PUT /images/1")
    assert.deepStrictEqual([http.rawPath, http.rawQueryString], ["/images/1", "size=small"])
    assert.deepStrictEqual(http.queryStringParameters, { size: "small" })
    assert.deepStrictEqual(http.headers, { "content-type": "image/png" })
    assert.deepStrictEqual(http.cookies, ["session=abc"])
    assert.deepStrictEqual([http.body, http.isBase64Encoded], [Buffer.from([0, 255, 1]).toString("base64"), true])

    const get = LambdaTest.httpApiEvent({ path: "/health" })
    assert.strictEqual(get.requestContext.http.method, "GET")
    assert.isFalse("body" in get || "cookies" in get || "queryStringParameters" in get)
    assert.strictEqual(LambdaTest.restApiEvent({ path: "/health" }).queryStringParameters, null)
  })

  it.scopedLive("through LambdaHttp.idempotent: the request as sent (text or bytes), then replayed", () =>
    Effect.gen(function*() {
      let runs = 0
      const handler = yield* disposed(LambdaHttp.idempotent({
        name: "orders",
        layer: IdempotencyStore.layerMemoryWith({ warn: false }),
        handler: (request) =>
          Effect.promise(async () =>
            Response.json({
              run: ++runs,
              method: request.method,
              url: request.url,
              cookie: request.headers.get("cookie"),
              body: Array.from(new Uint8Array(await request.arrayBuffer()))
            }, { status: 201 })
          )
      }))
      const bytes = new Uint8Array([0, 255, 1])
      /** The same upload each time: a fresh event of the same request. */
      const upload = () =>
        LambdaTest.httpApiEvent({
          method: "POST",
          path: "/uploads?source=web",
          headers: { "Content-Type": "application/octet-stream", "Idempotency-Key": "k-1" },
          cookies: ["session=abc"],
          body: bytes
        })
      /** A 201 whose body echoes the request the handler saw, its cookie `session=abc`. */
      const assertEchoed = (
        reply: { readonly statusCode?: number | undefined; readonly body?: string | undefined },
        echoed: { readonly run: number; readonly url: string; readonly body: ReadonlyArray<number> }
      ) => {
        assert.strictEqual(reply.statusCode, 201)
        assert.deepStrictEqual(JSON.parse(reply.body!), { ...echoed, method: "POST", cookie: "session=abc" })
      }
      const first = yield* LambdaTest.invoke(handler, upload())
      assertEchoed(first, { run: 1, url: "https://api.example.com/uploads?source=web", body: [0, 255, 1] })
      const replay = yield* LambdaTest.invoke(handler, upload())
      assert.strictEqual(replay.body, first.body)
      assert.strictEqual(replay.headers?.["idempotent-replayed"], "true")

      const rest = yield* LambdaTest.invoke(
        handler,
        LambdaTest.restApiEvent({
          method: "POST",
          path: "/orders?tag=a&tag=b",
          headers: { "Content-Type": "text/plain", "Idempotency-Key": "k-2" },
          cookies: ["session=abc"],
          body: "hi"
        })
      )
      assertEchoed(rest, {
        run: 2,
        url: "https://api.example.com/orders?tag=a&tag=b",
        body: Array.from(new TextEncoder().encode("hi"))
      })
    }))
})
