/**
 * The brokers of the order consumers' tests: the RabbitMQ of `TEST_AMQP_URL`, else a
 * `rabbitmq-server` node started on free loopback ports (test-support's `Brokers`), and the NATS
 * server of `TEST_NATS_URL`, else a `nats-server -js` started on a free loopback port with a
 * temporary store, as the queue package's JetStream tests start it. Neither is ever skipped: a
 * broker that cannot be had fails the run with what to install.
 */
import { accepts, rabbitMq } from "@effect-idempotency/test-support/Brokers"
import { freePort, requireExecutable, ServerError, spawn } from "@effect-idempotency/test-support/Servers"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { TestProject } from "vitest/node"

const NATS_MISSING =
  "No NATS server for the tests: set TEST_NATS_URL (nats://127.0.0.1:4222, JetStream on), or install nats-server (Debian: apt install nats-server)"

/** `TEST_NATS_URL` (loopback, answering), else a `nats-server -js` of the run's own. */
const nats: Effect.Effect<string, ServerError, Scope.Scope> = Effect.gen(function*() {
  const configured = process.env.TEST_NATS_URL === "" ? undefined : process.env.TEST_NATS_URL
  if (configured !== undefined) {
    const url = new URL(configured)
    if (url.hostname !== "127.0.0.1" && url.hostname !== "localhost") {
      return yield* new ServerError({ message: `TEST_NATS_URL must name a loopback server, not ${url.hostname}` })
    }
    yield* accepts(Number(url.port === "" ? 4222 : url.port)).pipe(
      Effect.mapError((cause) => new ServerError({ message: `TEST_NATS_URL=${configured}: no server answers`, cause }))
    )
    return configured
  }
  const binary = yield* requireExecutable(["nats-server"], NATS_MISSING, {
    variable: "NATS_SERVER",
    after: ["/usr/sbin", "/usr/local/sbin"]
  })
  const port = yield* freePort
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "examples-nats-"))),
    (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
  )
  yield* spawn({
    name: "nats-server",
    command: binary,
    args: ["-js", "-a", "127.0.0.1", "-p", String(port), "-sd", dir],
    ready: accepts(port),
    timeout: "20 seconds",
    onProcessExit: () => fs.rmSync(dir, { recursive: true, force: true })
  })
  return `nats://127.0.0.1:${port}`
})

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const scope = Effect.runSync(Scope.make())
  const [amqp, natsUrl] = await Effect.runPromise(
    Scope.extend(Effect.all([rabbitMq, nats], { concurrency: 2 }), scope).pipe(
      Effect.tapErrorCause(() => Scope.close(scope, Exit.void))
    )
  )
  project.provide("amqpUrl", amqp.url)
  project.provide("natsUrl", natsUrl)
  return () => Effect.runPromise(Scope.close(scope, Exit.void))
}

declare module "vitest" {
  export interface ProvidedContext {
    amqpUrl: string
    natsUrl: string
  }
}
