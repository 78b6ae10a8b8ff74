/**
 * The brokers of the order consumers' tests: the RabbitMQ of `TEST_AMQP_URL`, else a
 * `rabbitmq-server` node started on free loopback ports (test-support's `Brokers`), and the NATS
 * server of `TEST_NATS_URL`, else a `nats-server -js` of the run's own (`Brokers.nats`). Neither is ever skipped: a
 * broker that cannot be had fails the run with what to install.
 */
import { nats, rabbitMq } from "@effect-idempotency/test-support/Brokers"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import type { TestProject } from "vitest/node"

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const scope = Effect.runSync(Scope.make())
  const [amqp, natsUrl] = await Effect.runPromise(
    Scope.extend(Effect.all([rabbitMq, nats()], { concurrency: 2 }), scope).pipe(
      Effect.tapErrorCause(() => Scope.close(scope, Exit.void))
    )
  )
  project.provide("amqpUrl", amqp.url)
  project.provide("natsUrl", natsUrl.url)
  return () => Effect.runPromise(Scope.close(scope, Exit.void))
}

declare module "vitest" {
  export interface ProvidedContext {
    amqpUrl: string
    natsUrl: string
  }
}
