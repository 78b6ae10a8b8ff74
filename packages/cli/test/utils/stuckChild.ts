/**
 * A process that runs one operation through the library (`Idempotency.once`) on the store the CLI's
 * arguments name (`StoreTarget`, as the CLI resolves them), for the parent to kill mid-flight
 * (`scenario.ts`). Its lease is short and kept alive by a heartbeat while its downstream runs; the
 * downstream prints `EXECUTING` and never ends, so the process waits until it is killed, and its
 * lease then ends with no one to extend it.
 *
 * Arguments: the operation, the key, the lease in milliseconds, then the CLI's store arguments
 * (`--store <url>`, and `--table`, `--prefix`…).
 */
import { StoreTarget } from "@effect-idempotency/cli"
import { Idempotency } from "@effect-idempotency/core"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"

const [operation, key, leaseMillis, ...storeArgs] = process.argv.slice(2) as [string, string, string, ...Array<string>]

const flag = (name: string): Option.Option<string> => {
  const at = storeArgs.indexOf(`--${name}`)
  return at === -1 ? Option.none() : Option.fromNullable(storeArgs[at + 1])
}

const store = Layer.unwrapEffect(
  Effect.map(
    StoreTarget.resolve({
      store: Option.map(flag("store"), Redacted.make),
      table: flag("table"),
      schema: flag("schema"),
      prefix: flag("prefix"),
      keyAttribute: flag("key-attribute"),
      ttlAttribute: flag("ttl-attribute")
    }),
    StoreTarget.layer
  )
)

const lease = Number(leaseMillis)

Effect.runFork(
  Effect.sync(() => process.stdout.write("EXECUTING\n")).pipe(
    Effect.zipRight(Effect.never),
    Idempotency.once({
      operation,
      key,
      payload: { amount: 1 },
      success: Schema.Number,
      timeout: "1 hour",
      lease: Duration.millis(lease),
      heartbeat: Duration.millis(lease / 4)
    }),
    Effect.provide(store),
    Effect.tapErrorCause((cause) => Effect.sync(() => process.stderr.write(`${cause}\n`))),
    Effect.ensuring(Effect.sync(() => process.exit(1)))
  )
)
