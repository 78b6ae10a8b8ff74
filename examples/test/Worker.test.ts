/**
 * The Worker example (`src/worker/`) inside workerd: both Workers are bundled with esbuild from the
 * packages' sources and served by Miniflare, with one D1 database in memory for the idempotency
 * records and the order API's `orders` table. Every count is read from that database.
 *
 * The order API writes at once and answers after `RESPONSE_DELAY`. The seed's retry scenario, as a
 * Worker meets it: no platform stops a Worker while its client waits, so it is the client that gives
 * up (it aborts its request after `CLIENT_TIMEOUT`) and retries. The Worker's attempt goes on and
 * records the order API's answer, which the retry gets. (Miniflare does not pass the abort on to the
 * Worker; deployed, workerd would cancel the attempt but for its `waitUntil`.) `shop-strict` is the
 * same Worker with a time limit shorter than the order API's delay: the wrapper's deadline cuts the
 * attempt off, and the outcome "unknown" is what every retry gets.
 */
import type { D1SqlClient } from "@effect-idempotency/sql"
import { Workers } from "@effect-idempotency/test-support"
import { assert, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import type { YieldWrap } from "effect/Utils"
import { randomUUID } from "node:crypto"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const worker = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "src", "worker")

/** How long the order API takes to answer, after its write. */
const RESPONSE_DELAY = Duration.millis(2500)

/** How long the client waits for an answer before it gives up. */
const CLIENT_TIMEOUT = Duration.millis(500)

/** The time limit of `shop-strict`: shorter than the order API's delay. */
const STRICT_TIME_LIMIT = Duration.millis(1000)

/** Each test's time, at most. */
const TIMEOUT = 30_000

/** The concurrent requests of one key. */
const DUPLICATES = 8

/** Both Workers as ES modules, from the packages' sources. */
const bundle = Effect.map(
  Workers.bundleFiles({ shop: path.join(worker, "index.ts"), "orders-api": path.join(worker, "OrdersApi.ts") }),
  (scripts) => ({ shop: scripts["shop"]!, ordersApi: scripts["orders-api"]! })
)

type Answer = Workers.Answer

/** A request of the client: the Worker (by host), the raw `Idempotency-Key` field, the body. */
interface Post {
  readonly host?: "shop" | "shop-strict" | undefined
  readonly key?: string | undefined
  readonly body: unknown
}

class Workerd extends Context.Tag("Worker.test/Workerd")<Workerd, {
  /** Sends `POST /orders` to a Worker; interrupting it aborts the request (the client goes away). */
  readonly post: (request: Post) => Effect.Effect<Answer>
  /** Runs a query on the D1 database and returns its rows. */
  readonly query: Workers.Query
}>() {}

const WorkerdLive = Layer.scoped(
  Workerd,
  Effect.gen(function*() {
    const scripts = yield* bundle
    const common = { modules: true, compatibilityDate: "2026-04-01", d1Databases: { DB: "shop-db" } }
    const shop = {
      ...common,
      compatibilityFlags: ["nodejs_compat"],
      script: scripts.shop,
      serviceBindings: { ORDERS: "orders-api" }
    }
    const { miniflare } = yield* Workers.miniflare({
      workers: [
        { ...shop, name: "shop", routes: ["shop/*"] },
        {
          ...shop,
          name: "shop-strict",
          routes: ["shop-strict/*"],
          bindings: { TIME_LIMIT_MS: String(Duration.toMillis(STRICT_TIME_LIMIT)) }
        },
        {
          ...common,
          name: "orders-api",
          script: scripts.ordersApi,
          bindings: { RESPONSE_DELAY_MS: String(Duration.toMillis(RESPONSE_DELAY)) }
        }
      ]
    })
    // the Workers loaded before the first test: its timing is the scenario's, not a cold start's
    for (const host of ["shop", "shop-strict"]) {
      yield* Effect.tryPromise(() =>
        miniflare.dispatchFetch(`http://${host}/`).then((response) => response.arrayBuffer())
      )
    }
    const db: D1SqlClient.D1Database = yield* Effect.tryPromise(() => miniflare.getD1Database("DB", "shop"))
    return {
      post: ({ body, host, key }) =>
        Effect.promise(async (signal) => {
          const response = await miniflare.dispatchFetch(`http://${host ?? "shop"}/orders`, {
            method: "POST",
            headers: { "content-type": "application/json", ...(key === undefined ? {} : { "idempotency-key": key }) },
            body: JSON.stringify(body),
            signal
          })
          return Workers.answerOf(response)
        }),
      query: Workers.d1Query(db)
    }
  })
)

const post = (request: Post) => Effect.flatMap(Workerd, (workerd) => workerd.post(request))

/** The order API's rows of a SKU. */
const ordersOf = (sku: string) =>
  Effect.flatMap(Workerd, (workerd) => workerd.query("SELECT id, response FROM orders WHERE sku = ?", sku))

/** The idempotency records of a key. */
const recordsOf = (key: string) =>
  Effect.flatMap(
    Workerd,
    (workerd) => workerd.query(`SELECT status, outcome_kind, attempt FROM idempotency_records WHERE "key" = ?`, key)
  )

/** Every idempotency record. */
const allRecords = Effect.flatMap(
  Workerd,
  (workerd) => Effect.map(workerd.query("SELECT count(*) AS n FROM idempotency_records"), (rows) => rows[0]!["n"])
)

/** The client's retry: sent again every 250 ms while the first attempt runs (409), for 10 s at most. */
const retryWhileInProgress = (request: Post) =>
  post(request).pipe(
    Effect.filterOrFail((answer) => answer.status !== 409, () => "the first attempt still runs"),
    Effect.retry({ schedule: Schedule.spaced("250 millis"), times: 40 })
  )

/** What the draft replays of a response: the status, the stored headers and the body. */
const replayed = (answer: Answer) => ({
  status: answer.status,
  contentType: answer.headers["content-type"],
  location: answer.headers["location"],
  body: answer.body
})

const order = (sku: string) => ({ sku, quantity: 1 })

layer(WorkerdLive, { excludeTestServices: true, timeout: "2 minutes" })("the Worker example, in workerd", (it) => {
  /** A test in workerd; its body is a generator, as `Effect.gen` takes. */
  const workerdTest = (
    name: string,
    body: () => Generator<YieldWrap<Effect.Effect<unknown, unknown, Workerd>>, void, unknown>
  ) => it.effect(name, () => Effect.gen(body), TIMEOUT)

  workerdTest(
    "the client gives up while the order API answers; its retry gets the first attempt's response, one order",
    function*() {
      const key = randomUUID()
      const sku = `BOOK-${key.slice(0, 8)}`
      // the draft's form of the key: an sf-string
      const request = { key: `"${key}"`, body: order(sku) }

      // attempt 1: the order API writes at once; the client stops waiting before its answer
      const first = yield* Effect.timeout(post(request), CLIENT_TIMEOUT).pipe(Effect.flip)
      assert.strictEqual(first._tag, "TimeoutException")
      assert.strictEqual((yield* ordersOf(sku)).length, 1)
      assert.deepStrictEqual(yield* recordsOf(key), [{ status: "IN_PROGRESS", outcome_kind: null, attempt: 1 }])

      // attempt 2, at once: the first attempt still runs in the Worker
      const busy = yield* post(request)
      assert.strictEqual(busy.status, 409)
      assert.strictEqual(busy.headers["content-type"], "application/problem+json")
      assert.isAbove(Number(busy.headers["retry-after"]), 0)

      // the retries that follow: 409 until the first attempt has recorded the order API's answer
      const replay = yield* retryWhileInProgress(request)
      const [row] = yield* ordersOf(sku)
      const created = JSON.parse(String(row!["response"])) as { readonly orderId: string }
      assert.deepStrictEqual(replayed(replay), {
        status: 201,
        contentType: "application/json",
        location: `/orders/${created.orderId}`,
        body: String(row!["response"])
      })
      assert.strictEqual(replay.headers["idempotent-replayed"], "true")
      // the bare form of the key is the same key
      const again = yield* post({ ...request, key })
      assert.deepStrictEqual(replayed(again), replayed(replay))
      assert.strictEqual(again.headers["idempotent-replayed"], "true")

      assert.strictEqual((yield* ordersOf(sku)).length, 1)
      assert.deepStrictEqual(yield* recordsOf(key), [{ status: "COMPLETED", outcome_kind: "Success", attempt: 1 }])
    }
  )

  workerdTest(
    "the time limit cuts the attempt off: 504, then the unknown outcome replayed to every retry, one order",
    function*() {
      const key = randomUUID()
      const sku = `PEN-${key.slice(0, 8)}`
      const request = { host: "shop-strict", key, body: order(sku) } as const

      const first = yield* post(request)
      assert.strictEqual(first.status, 504)
      assert.strictEqual(first.headers["content-type"], "application/problem+json")
      assert.isUndefined(first.headers["idempotent-replayed"])
      assert.strictEqual((yield* ordersOf(sku)).length, 1)

      const retries = yield* Effect.all([post(request), post(request)])
      for (const retry of retries) {
        assert.deepStrictEqual(replayed(retry), replayed(retries[0]!))
        assert.strictEqual(retry.status, 504)
        assert.strictEqual(retry.headers["idempotent-replayed"], "true")
      }
      // the order API's answer came after the cut-off, to nobody; it wrote once
      yield* Effect.sleep(RESPONSE_DELAY)
      assert.strictEqual((yield* ordersOf(sku)).length, 1)
      assert.deepStrictEqual(yield* recordsOf(key), [{ status: "COMPLETED", outcome_kind: "Timeout", attempt: 1 }])
    }
  )

  workerdTest(
    `${DUPLICATES} concurrent requests of one key: one runs, the others get 409 or its response`,
    function*() {
      const key = randomUUID()
      const sku = `LAMP-${key.slice(0, 8)}`
      const request = { key, body: order(sku) }
      const answers = yield* Effect.all(Array.from({ length: DUPLICATES }, () => post(request)), {
        concurrency: "unbounded"
      })
      const fresh = answers.filter((answer) =>
        answer.status === 201 && answer.headers["idempotent-replayed"] === undefined
      )
      assert.strictEqual(fresh.length, 1)
      for (const answer of answers) {
        if (answer === fresh[0]) continue
        if (answer.status === 409) assert.isAbove(Number(answer.headers["retry-after"]), 0)
        else assert.deepStrictEqual(replayed(answer), replayed(fresh[0]!))
      }
      const replay = yield* post(request)
      assert.deepStrictEqual(replayed(replay), replayed(fresh[0]!))
      assert.strictEqual(replay.headers["idempotent-replayed"], "true")
      assert.strictEqual((yield* ordersOf(sku)).length, 1)
      assert.deepStrictEqual(yield* recordsOf(key), [{ status: "COMPLETED", outcome_kind: "Success", attempt: 1 }])
    }
  )

  workerdTest("the key with another body: 422, and nothing is written", function*() {
    const key = randomUUID()
    const sku = `CUP-${key.slice(0, 8)}`
    assert.strictEqual((yield* post({ key, body: order(sku) })).status, 201)
    const reused = yield* post({ key, body: { sku, quantity: 2 } })
    assert.strictEqual(reused.status, 422)
    assert.strictEqual(reused.headers["content-type"], "application/problem+json")
    const other = yield* post({ key, body: order(`${sku}-other`) })
    assert.strictEqual(other.status, 422)
    assert.strictEqual((yield* ordersOf(sku)).length, 1)
    assert.strictEqual((yield* ordersOf(`${sku}-other`)).length, 0)
    assert.deepStrictEqual(yield* recordsOf(key), [{ status: "COMPLETED", outcome_kind: "Success", attempt: 1 }])
  })

  workerdTest("a missing or invalid key: 400, the order API is not called and the store is not touched", function*() {
    const sku = `BAD-${randomUUID().slice(0, 8)}`
    // a valid request first: the tables exist, whatever ran before
    assert.strictEqual((yield* post({ key: randomUUID(), body: order(`${sku}-valid`) })).status, 201)
    const before = yield* allRecords
    const keys = [undefined, "\"has space\"", "x".repeat(256), "\"a\", \"b\"", "\"unterminated"]
    for (const key of keys) {
      const answer = yield* post({ key, body: order(sku) })
      assert.strictEqual(answer.status, 400, String(key))
      assert.strictEqual(answer.headers["content-type"], "application/problem+json")
    }
    const notAnOrder = yield* post({ key: randomUUID(), body: { sku, quantity: 0 } })
    assert.strictEqual(notAnOrder.status, 400)
    assert.strictEqual((yield* ordersOf(sku)).length, 0)
    assert.strictEqual(yield* allRecords, before)
  })
})
