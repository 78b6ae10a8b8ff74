/**
 * The store on Cloudflare D1 (`D1SqlClient`) and on a Durable Object's SQLite storage
 * (`DurableObjectSqlClient`), run inside workerd: the test Worker (`worker/`) is bundled with
 * esbuild into one ES module, from the packages' sources, and served by Miniflare with a D1
 * database and a SQLite-backed Durable Object, both in memory. Each test asks the Worker to run one
 * check there (the shared suites' checks, the clients' own) and reads its answer; the race sends
 * concurrent requests from here, so that they are concurrent invocations of the Worker.
 */
import { Workers } from "@effect-idempotency/test-support"
import { assert, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { Answer, RaceResult } from "./worker/checks.js"
import { suites } from "./worker/checks.js"

const worker = path.join(path.dirname(fileURLToPath(import.meta.url)), "worker")

/**
 * The test Worker as one ES module: the workspace's packages from their sources (the `source`
 * condition), and `@effect/vitest`, which the suites import for `assert`, replaced by `vitest.ts`.
 */
const bundle = Effect.map(
  Workers.bundleFiles({ index: path.join(worker, "index.ts") }, [{
    name: "effect-vitest-in-workerd",
    setup: (build) => {
      build.onResolve({ filter: /^@effect\/vitest$/ }, () => ({ path: path.join(worker, "vitest.ts") }))
    }
  }]),
  (scripts) => scripts["index"]!
)

class Workerd extends Context.Tag("Cloudflare.test/Workerd")<Workerd, {
  /** Sends a request to the Worker and reads its answer. */
  readonly call: (method: "GET" | "POST", path: string) => Effect.Effect<Answer>
}>() {}

const WorkerdLive = Layer.scoped(
  Workerd,
  Effect.gen(function*() {
    const script = yield* bundle
    const { miniflare } = yield* Workers.miniflare({
      modules: true,
      script,
      compatibilityDate: "2026-04-01",
      d1Databases: ["DB"],
      durableObjects: { STORE: { className: "StoreObject", useSQLite: true } }
    })
    return {
      call: (method, path) =>
        Effect.promise(async () => {
          const response = await miniflare.dispatchFetch(`http://worker${path}`, { method })
          return (await response.json()) as Answer
        })
    }
  })
)

const call = (method: "GET" | "POST", path: string) => Effect.flatMap(Workerd, (workerd) => workerd.call(method, path))

/** Each check's time, in workerd, at most. */
const TIMEOUT = 30_000

/** The concurrent requests of the race. */
const RACERS = 50

const checks = Object.entries(suites())

layer(WorkerdLive, { timeout: "2 minutes" })("D1 and Durable Object storage, inside workerd", (it) => {
  for (const binding of ["d1", "do"] as const) {
    it.effect(`${binding}: the Worker's bundle has the suites' checks`, () =>
      Effect.gen(function*() {
        const answer = yield* call("GET", `/${binding}/suites`)
        assert.deepStrictEqual(
          answer.details,
          Object.fromEntries(checks.map(([suite, list]) => [suite, list.map((check) => check.name)]))
        )
      }), TIMEOUT)

    for (const [suite, list] of checks) {
      list.forEach(({ name }, index) =>
        it.effect(`${binding} ${suite}: ${name}`, () =>
          Effect.gen(function*() {
            const answer = yield* call("POST", `/${binding}/check/${suite}/${index}`)
            assert.strictEqual(answer.name, name)
            assert.isTrue(answer.ok, String(answer.details))
          }), TIMEOUT)
      )
    }

    it.effect(
      `${binding}: exactly one of ${RACERS} concurrent requests reserves a key; the others see its record`,
      () =>
        Effect.gen(function*() {
          const key = crypto.randomUUID()
          const answers = yield* Effect.all(
            Array.from({ length: RACERS }, () => call("POST", `/${binding}/race/${key}`)),
            { concurrency: "unbounded" }
          )
          for (const answer of answers) assert.isTrue(answer.ok, String(answer.details))
          const results = answers.map((answer) => answer.details as RaceResult)
          const winners = results.filter((result) => result.result === "Reserved")
          assert.strictEqual(winners.length, 1)
          for (const result of results) {
            if (result.result === "Existing") {
              assert.strictEqual(result.status, "IN_PROGRESS")
              assert.strictEqual(result.token, winners[0]!.token)
            }
          }
        }),
      TIMEOUT
    )
  }
})
