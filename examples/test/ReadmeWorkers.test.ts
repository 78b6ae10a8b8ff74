/**
 * The Cloudflare Workers snippets of `packages/http/README.md`, run as they are written: each is read
 * from the README by its consumer-test marker, bundled with esbuild from the packages' sources and
 * served by Miniflare (workerd).
 *
 * - `workers`: a Worker on D1, its store made per request; every count is read from the database.
 * - `durable-objects`: a Worker that sends each request to the Durable Object of its key, whose
 *   storage keeps the records, in front of a payments API (a service binding) that counts its
 *   charges and answers late, so concurrent requests overlap.
 *
 * A control shows what the routing avoids: the same Durable Object snippet routed by the raw header,
 * where `"k-1"` and `k-1` reach two objects, and each charges.
 */
import type { D1SqlClient } from "@effect-idempotency/sql"
import { Workers } from "@effect-idempotency/test-support"
import { assert, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { YieldWrap } from "effect/Utils"
import { randomUUID } from "node:crypto"
import * as path from "node:path"

const README = "packages/http/README.md"

/** Each test's time, at most. */
const TIMEOUT = 30_000

/** The routing line of the Durable Object snippet, and the raw header in its place (the control). */
const ROUTED = "env.CHARGES.idFromName(key.right)"
const RAW = "env.CHARGES.idFromName(request.headers.get(\"idempotency-key\") ?? \"\")"

/** The payments API: counts the charges of each path, and answers 200 ms after its write. */
const PAYMENTS = `
const charges = new Map()
export default {
  async fetch(request) {
    const path = new URL(request.url).pathname
    if (request.method === "GET") return Response.json({ charges: charges.get(path) ?? 0 })
    charges.set(path, (charges.get(path) ?? 0) + 1)
    await new Promise((resolve) => setTimeout(resolve, 200))
    return Response.json({ chargeId: "ch_" + crypto.randomUUID(), ...(await request.json()) }, { status: 201 })
  }
}
`

type Answer = Workers.Answer

/** A POST to a Worker (by host): the raw `Idempotency-Key` field, and the body's text. */
interface Post {
  readonly host: "orders" | "charges" | "raw"
  readonly path: string
  readonly key?: string | undefined
  readonly body: string
}

class Workerd extends Context.Tag("ReadmeWorkers.test/Workerd")<Workerd, {
  readonly post: (request: Post) => Effect.Effect<Answer>
  /** The charges the payments API made for a path. */
  readonly charges: (path: string) => Effect.Effect<number>
  /** Runs a query on the `workers` snippet's D1 database and returns its rows. */
  readonly query: Workers.Query
}>() {}

const WorkerdLive = Layer.scoped(
  Workerd,
  Effect.gen(function*() {
    const resolveDir = path.join(Workers.root, path.dirname(README))
    const workers = yield* Workers.bundleSource(Workers.readmeSnippet(README, "workers"), resolveDir)
    const durableObjects = Workers.readmeSnippet(README, "durable-objects")
    assert.include(durableObjects, ROUTED)
    const routed = yield* Workers.bundleSource(durableObjects, resolveDir)
    const raw = yield* Workers.bundleSource(durableObjects.replace(ROUTED, RAW), resolveDir)
    const common = { modules: true, compatibilityDate: "2026-04-01", compatibilityFlags: ["nodejs_compat"] }
    const charges = {
      ...common,
      durableObjects: { CHARGES: { className: "Charges", useSQLite: true } },
      serviceBindings: { PAYMENTS: "payments" }
    }
    const { miniflare } = yield* Workers.miniflare({
      workers: [
        { ...common, name: "orders", script: workers, routes: ["orders/*"], d1Databases: { DB: "orders-db" } },
        { ...charges, name: "charges", script: routed, routes: ["charges/*"] },
        { ...charges, name: "raw", script: raw, routes: ["raw/*"] },
        { ...common, name: "payments", script: PAYMENTS, routes: ["payments/*"] }
      ]
    })
    const db: D1SqlClient.D1Database = yield* Effect.tryPromise(() => miniflare.getD1Database("DB", "orders"))
    return {
      post: ({ body, host, key, path }) =>
        Effect.promise(async () => {
          const response = await miniflare.dispatchFetch(`http://${host}${path}`, {
            method: "POST",
            headers: { "content-type": "application/json", ...(key === undefined ? {} : { "idempotency-key": key }) },
            body
          })
          return Workers.answerOf(response)
        }),
      charges: (path) =>
        Effect.promise(async () => {
          const response = await miniflare.dispatchFetch(`http://payments${path}`)
          return ((await response.json()) as { readonly charges: number }).charges
        }),
      query: Workers.d1Query(db)
    }
  })
)

const post = (request: Post) => Effect.flatMap(Workerd, (workerd) => workerd.post(request))
const chargesOf = (path: string) => Effect.flatMap(Workerd, (workerd) => workerd.charges(path))

/** The records of a key in the `workers` snippet's database (none before its first request). */
const recordsOf = (key: string) =>
  Effect.flatMap(
    Workerd,
    (workerd) =>
      workerd.query(`SELECT status, attempt FROM idempotency_records WHERE "key" = ?`, key).pipe(
        Effect.catchAllDefect(() => Effect.succeed([]))
      )
  )

const order = JSON.stringify({ sku: "BOOK-42", quantity: 1 })
const charge = JSON.stringify({ amountCents: 1999 })

/** What a replay must repeat of a response. */
const replayed = (answer: Answer) => ({ status: answer.status, body: answer.body })

layer(WorkerdLive, { excludeTestServices: true, timeout: "2 minutes" })(
  "the README's Workers snippets, in workerd",
  (it) => {
    /** A test in workerd; its body is a generator, as `Effect.gen` takes. */
    const workerdTest = (
      name: string,
      body: () => Generator<YieldWrap<Effect.Effect<unknown, unknown, Workerd>>, void, unknown>
    ) => it.effect(name, () => Effect.gen(body), TIMEOUT)

    workerdTest("workers: the key's two spellings get one order, the second replayed", function*() {
      const key = randomUUID()
      const first = yield* post({ host: "orders", path: "/orders", key: `"${key}"`, body: order })
      assert.strictEqual(first.status, 201)
      assert.isUndefined(first.headers["idempotent-replayed"])
      const again = yield* post({ host: "orders", path: "/orders", key, body: order })
      assert.deepStrictEqual(replayed(again), replayed(first))
      assert.strictEqual(again.headers["idempotent-replayed"], "true")
      assert.deepStrictEqual(yield* recordsOf(key), [{ status: "COMPLETED", attempt: 1 }])
    })

    workerdTest("workers: a body that is not JSON, or not an order, is a 400 and leaves no record", function*() {
      const key = randomUUID()
      for (const body of ["{\"sku\": \"BOOK-42\",", JSON.stringify({ sku: "BOOK-42" })]) {
        const answer = yield* post({ host: "orders", path: "/orders", key, body })
        assert.strictEqual(answer.status, 400, body)
        assert.strictEqual(answer.headers["content-type"], "application/problem+json")
      }
      assert.deepStrictEqual(yield* recordsOf(key), [])
      // the client's corrected retry runs at once
      assert.strictEqual((yield* post({ host: "orders", path: "/orders", key, body: order })).status, 201)
      const missing = yield* post({ host: "orders", path: "/orders", body: order })
      assert.strictEqual(missing.status, 400)
    })

    workerdTest(
      "durable-objects: the key's two spellings reach one object; the payments API charges once",
      function*() {
        const path = `/charges/${randomUUID()}`
        const first = yield* post({ host: "charges", path, key: "\"k-1\"", body: charge })
        assert.strictEqual(first.status, 201)
        const again = yield* post({ host: "charges", path, key: "k-1", body: charge })
        assert.deepStrictEqual(replayed(again), replayed(first))
        assert.strictEqual(again.headers["idempotent-replayed"], "true")
        assert.strictEqual(yield* chargesOf(path), 1)
      }
    )

    workerdTest("durable-objects: both spellings at once, four of each: one charge", function*() {
      const path = `/charges/${randomUUID()}`
      const key = randomUUID()
      const answers = yield* Effect.all(
        Array.from(
          { length: 8 },
          (_, i) => post({ host: "charges", path, key: i % 2 === 0 ? key : `"${key}"`, body: charge })
        ),
        { concurrency: "unbounded" }
      )
      const fresh = answers.filter((answer) =>
        answer.status === 201 && answer.headers["idempotent-replayed"] === undefined
      )
      assert.strictEqual(fresh.length, 1)
      for (const answer of answers) {
        if (answer.status === 409) {
          assert.strictEqual(answer.headers["retry-after"], "1")
        } else assert.deepStrictEqual(replayed(answer), replayed(fresh[0]!))
      }
      assert.strictEqual(yield* chargesOf(path), 1)
    })

    workerdTest(
      "durable-objects: a missing or invalid key is the router's 400; a bad body the object's, no charge",
      function*() {
        const path = `/charges/${randomUUID()}`
        for (const key of [undefined, "has space", "\"unterminated"]) {
          const answer = yield* post({ host: "charges", path, key, body: charge })
          assert.strictEqual(answer.status, 400, String(key))
          assert.strictEqual(answer.headers["content-type"], "application/problem+json")
        }
        const key = randomUUID()
        assert.strictEqual((yield* post({ host: "charges", path, key, body: "{\"amountCents\": " })).status, 400)
        assert.strictEqual(yield* chargesOf(path), 0)
        assert.strictEqual((yield* post({ host: "charges", path, key, body: charge })).status, 201)
        assert.strictEqual(yield* chargesOf(path), 1)
      }
    )

    workerdTest(
      "control: routed by the raw header, the two spellings reach two objects, and each charges",
      function*() {
        const path = `/charges/${randomUUID()}`
        const first = yield* post({ host: "raw", path, key: "\"k-1\"", body: charge })
        const second = yield* post({ host: "raw", path, key: "k-1", body: charge })
        assert.deepStrictEqual([first.status, second.status], [201, 201])
        assert.isUndefined(second.headers["idempotent-replayed"])
        assert.strictEqual(yield* chargesOf(path), 2)
      }
    )
  }
)
