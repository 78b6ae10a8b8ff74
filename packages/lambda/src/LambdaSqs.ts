/**
 * Idempotent SQS consumers: an operation per record, a partial batch response (README.md#per-invocation).
 *
 * @example
 * ```ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import { LambdaSqs } from "@effect-idempotency/lambda"
 * import { Effect, Schema } from "effect"
 *
 * export const handler = LambdaSqs.batch({
 *   name: "charge",
 *   layer: IdempotencyStore.layerMemory,
 *   body: Schema.parseJson(Schema.Struct({ chargeId: Schema.String, cents: Schema.Int })),
 *   key: (body) => body.chargeId,
 *   handler: (body) => Effect.log(`charging ${body.cents} for ${body.chargeId}`)
 * })
 * ```
 *
 * @since 0.1.0
 */
import type { IdempotencyContext, IdempotencyPolicy, IdempotencyStore } from "@effect-idempotency/core"
import { IdempotencyError } from "@effect-idempotency/core"
import type { Idempotency } from "@effect-idempotency/core"
import type { SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as internal from "./internal/serve.js"
import type { InsufficientTime } from "./LambdaError.js"
import { InvalidEvent } from "./LambdaError.js"
import type { Handler, Operation } from "./LambdaEvent.js"
import { runIdempotent } from "./LambdaEvent.js"
import type * as LambdaInvocation from "./LambdaInvocation.js"

/**
 * The default number of records of a batch processed at once.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_CONCURRENCY = 8

/**
 * The options of `batch`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<B, BI, A, IA, E, ROut, LE, EF = never, IEF = never> extends Idempotency.Settings {
  readonly name: string
  readonly layer: Layer.Layer<ROut | IdempotencyStore.IdempotencyStore, LE>
  /** A record's body (a string) decoded: `Schema.parseJson(...)` for JSON. */
  readonly body: Schema.Schema<B, BI>
  /** Default: the record's `messageId`. */
  readonly key?: ((body: B, record: SQSRecord) => string) | undefined
  /** The part of a record the fingerprint covers. Default: its decoded body, encoded again. */
  readonly payload?: ((body: B, record: SQSRecord) => unknown) | undefined
  readonly scope?: ((body: B, record: SQSRecord) => string | undefined) | undefined
  /** Default: `Schema.Unknown`. */
  readonly success?: Schema.Schema<A, IA> | undefined
  readonly failure?: Schema.Schema<EF, IEF> | undefined
  readonly onFailure?: ((error: E) => IdempotencyPolicy.FailurePolicy) | undefined
  readonly margin?: Duration.DurationInput | undefined
  /** Default `DEFAULT_CONCURRENCY`; ignored with `fifo`. */
  readonly concurrency?: number | undefined
  readonly fifo?: boolean | undefined
  readonly handler: (
    body: B,
    record: SQSRecord
  ) => Effect.Effect<
    A,
    E,
    | NoInfer<ROut>
    | IdempotencyStore.IdempotencyStore
    | IdempotencyContext.IdempotencyContext
    | LambdaInvocation.Invocation
  >
}

/**
 * A consumer of SQS batches; its `operation` takes a record's decoded body, keyed as its `messageId`.
 *
 * @since 0.1.0
 * @category models
 */
export interface BatchHandler<B, A, E, R> extends Handler<SQSEvent, SQSBatchResponse> {
  readonly operation: Operation<B, A, E, R>
}

/**
 * An idempotent consumer of SQS batches.
 *
 * @since 0.1.0
 * @category constructors
 */
export const batch = <B, BI, E, ROut, LE, A = unknown, IA = unknown, EF = never, IEF = never>(
  options: Options<B, BI, A, IA, E, ROut, LE, EF, IEF>
): BatchHandler<B, A, E | EF | InsufficientTime | InvalidEvent, ROut> => {
  const decodeBody = Schema.decodeUnknown(options.body)
  const encodeBody = Schema.encode(options.body)
  const success = (options.success ?? Schema.Unknown) as Schema.Schema<A, IA>
  const invalid = (error: ParseResult.ParseError) =>
    new InvalidEvent({ detail: IdempotencyError.describeParseError(error) })

  /** `true` when a record is done (fresh or replayed), `false` when it goes back to the queue. */
  const settled = (record: SQSRecord) => (exit: Exit.Exit<unknown, unknown>): Effect.Effect<boolean> => {
    if (Exit.isSuccess(exit)) return Effect.succeed(true)
    const failure = Cause.failureOption(exit.cause)
    // See README.md#per-invocation: an outcome not kept counts as done
    if (Option.isSome(failure) && (failure.value as { readonly _tag?: unknown })._tag === "OutcomeNotReplayable") {
      return Effect.succeed(true)
    }
    const log = Option.isSome(failure)
      ? Effect.logWarning("a record failed; it goes back to the queue", failure.value)
      : Cause.isInterruptedOnly(exit.cause)
      ? Effect.void
      : Effect.logWarning(
        "a record's handler died; its defect policy was applied; it goes back to the queue",
        exit.cause
      )
    return Effect.as(log.pipe(Effect.annotateLogs({ messageId: record.messageId })), false)
  }

  const run = (body: B, record: SQSRecord, key: string, scope: string | undefined) =>
    Effect.flatMap(
      options.payload === undefined
        ? Effect.mapError(encodeBody(body), invalid)
        : Effect.succeed(options.payload(body, record)),
      (fingerprint) =>
        runIdempotent({ ...options, success, key, fingerprint, scope, effect: options.handler(body, record) })
    )

  /** Prepared in order, so that a duplicate in the batch waits for the earlier record and replays it. */
  const prepare = (record: SQSRecord, inBatch: Map<string, Deferred.Deferred<void>>) =>
    decodeBody(record.body).pipe(
      Effect.mapError(invalid),
      Effect.map((body) => {
        const key = options.key === undefined ? record.messageId : options.key(body, record)
        const scope = options.scope?.(body, record)
        const id = `${scope ?? ""}\u0000${key}`
        const earlier = inBatch.get(id)
        if (earlier !== undefined) return Effect.zipRight(Deferred.await(earlier), run(body, record, key, scope))
        const done = Deferred.unsafeMake<void>(FiberId.none)
        inBatch.set(id, done)
        return Effect.ensuring(run(body, record, key, scope), Deferred.succeed(done, undefined))
      }),
      Effect.exit,
      Effect.map((prepared) =>
        Exit.isSuccess(prepared)
          ? Effect.flatMap(Effect.exit(prepared.value), settled(record))
          : settled(record)(prepared)
      )
    )

  const handler = internal.serve(options, (event: SQSEvent) =>
    Effect.gen(function*() {
      const records = event.Records
      const inBatch = new Map<string, Deferred.Deferred<void>>()
      const runs = yield* Effect.forEach(records, (record) => prepare(record, inBatch))
      let done: ReadonlyArray<boolean>
      if (options.fifo === true) {
        const results: Array<boolean> = []
        for (const run of runs) {
          if (results.includes(false)) results.push(false)
          else results.push(yield* run)
        }
        done = results
      } else {
        done = yield* Effect.all(runs, {
          concurrency: Math.max(1, options.concurrency ?? DEFAULT_CONCURRENCY)
        })
      }
      return {
        batchItemFailures: records.filter((_, i) => !done[i]).map((record) => ({ itemIdentifier: record.messageId }))
      }
    }))
  return Object.assign(handler, {
    operation: internal.operation(
      options.name,
      (request: Idempotency.Request<B>) =>
        Effect.flatMap(Effect.mapError(encodeBody(request.payload), invalid), (encoded) => {
          const record = recordOf(request.key, String(encoded))
          return run(request.payload, record, request.key, request.scope ?? options.scope?.(request.payload, record))
        })
    )
  })
}

const recordOf = (messageId: string, body: string): SQSRecord => ({
  messageId,
  receiptHandle: `operation-${messageId}`,
  body,
  attributes: {
    ApproximateReceiveCount: "1",
    SentTimestamp: "0",
    SenderId: "operation",
    ApproximateFirstReceiveTimestamp: "0"
  },
  messageAttributes: {},
  md5OfBody: "",
  eventSource: "aws:sqs",
  eventSourceARN: "arn:aws:sqs:us-east-1:000000000000:operation",
  awsRegion: "us-east-1"
})
