/**
 * The CLI through the admin endpoint (`--endpoint`, the token from `IDEMPOTENCY_ADMIN_TOKEN`), on
 * D1: the `admin-workers` snippet of `packages/platform/README.md`, as it is written, bundled and
 * served by workerd (Miniflare) on a loopback port. The test process reaches the same D1 database
 * through Miniflare's binding, as the store of the operator's scenario.
 *
 * A killed process cannot be part of this scenario: the child would need the D1 database, which only
 * the Worker reaches; the same CLI commands meet a killed process on every store they reach
 * directly (the other suites).
 */
import { D1SqlClient, SqlIdempotencyStore } from "@effect-idempotency/sql"
import { Workers } from "@effect-idempotency/test-support"
import { assert, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { randomUUID } from "node:crypto"
import * as path from "node:path"
import { cli, Code, parsed } from "./utils/cli.js"
import { CliStore, scenario } from "./utils/scenario.js"

const README = "packages/platform/README.md"
const TOKEN = `admin-${randomUUID()}`

class Worker extends Context.Tag("Endpoint.test/Worker")<Worker, { readonly url: string }>() {}

/** The snippet in workerd, its D1 database, and the endpoint's URL. */
const WorkerLive = Layer.scopedContext(
  Effect.gen(function*() {
    const script = yield* Workers.bundleSource(
      Workers.readmeSnippet(README, "admin-workers"),
      path.join(Workers.root, "packages/platform")
    )
    const { miniflare, url } = yield* Workers.miniflare({
      host: "127.0.0.1",
      port: 0,
      modules: true,
      script,
      compatibilityDate: "2026-04-01",
      compatibilityFlags: ["nodejs_compat"],
      d1Databases: { DB: "admin-db" },
      bindings: { ADMIN_TOKEN: TOKEN }
    })
    const db: D1SqlClient.D1Database = yield* Effect.tryPromise(() => miniflare.getD1Database("DB"))
    const store = yield* Layer.build(
      SqlIdempotencyStore.layerWith({ migrate: true }).pipe(Layer.provide(D1SqlClient.layer(db)))
    )
    const endpoint = new URL("/admin", url).toString()
    return Context.add(store, Worker, { url: endpoint }).pipe(
      Context.add(CliStore, { args: ["--endpoint", endpoint], env: { IDEMPOTENCY_ADMIN_TOKEN: TOKEN } })
    )
  })
)

scenario("effect-idempotency through the admin endpoint, on D1 in workerd", {
  layer: WorkerLive,
  migrated: "refused",
  killedProcess: false
})

layer(WorkerLive, { excludeTestServices: true, timeout: "2 minutes" })("the admin endpoint's token", (it) => {
  it.effect(
    "a wrong token is refused (StoreError); none is a usage error; neither is printed",
    () =>
      Effect.gen(function*() {
        const { url } = yield* Worker
        const wrongToken = `${TOKEN}-wrong`
        const wrong = yield* cli(["stats", "--endpoint", url, "--json"], {
          env: { IDEMPOTENCY_ADMIN_TOKEN: wrongToken }
        })
        assert.strictEqual(wrong.code, Code.StoreError, wrong.stderr)
        assert.include(wrong.stderr, "refused the request's token")
        assert.notInclude(wrong.stdout + wrong.stderr, wrongToken)

        const none = yield* cli(["stats", "--endpoint", url, "--json"])
        assert.strictEqual(none.code, Code.Usage, none.stderr)
        assert.strictEqual(parsed(none).error._tag, "InvalidStore")

        const right = yield* cli(["stats", "--endpoint", url, "--json", "--token", TOKEN])
        assert.strictEqual(right.code, Code.Ok, right.stderr)
        assert.notInclude(right.stdout + right.stderr, TOKEN)
      }),
    60_000
  )
})
