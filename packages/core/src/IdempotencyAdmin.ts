/**
 * Seeing and acting on the records of any store (README.md#admin).
 *
 * @example
 * ```ts
 * import { IdempotencyAdmin, IdempotencyStore } from "@effect-idempotency/core"
 * import { Effect, Layer } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const admin = yield* IdempotencyAdmin.IdempotencyAdmin
 *   const stuck = yield* admin.list({ state: "stuck", limit: 20 })
 *   for (const record of stuck.records) {
 *     yield* admin.unblock(record, { reason: "INC-42: payments outage", expect: { attempt: record.attempt } })
 *   }
 * })
 *
 * Effect.runPromise(
 *   program.pipe(Effect.provide(IdempotencyAdmin.layer.pipe(Layer.provideMerge(IdempotencyStore.layerMemory))))
 * )
 * ```
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import type { StoreFailure } from "./IdempotencyError.js"
import * as IdempotencyKey from "./IdempotencyKey.js"
import type { IdempotencyRecord, OutcomeKind, Status } from "./IdempotencyRecord.js"
import { makeRecordId, outcomeToColumns } from "./IdempotencyRecord.js"
import { IdempotencyStore } from "./IdempotencyStore.js"
import * as internal from "./store/admin.js"

/**
 * Where a store keeps its admin primitives.
 *
 * @since 0.1.0
 * @category symbols
 */
export const AdminTypeId: typeof internal.AdminTypeId = internal.AdminTypeId

/**
 * What a record is doing, as an operator sees it (README.md#admin).
 *
 * @since 0.1.0
 * @category models
 */
export type State = internal.State

/**
 * The state of `record` at `now` (the store's clock).
 *
 * @since 0.1.0
 * @category utils
 */
export const stateOf: typeof internal.stateOf = internal.stateOf

/**
 * The states `unblock` deletes.
 *
 * @since 0.1.0
 * @category utils
 */
export const unblockable: ReadonlySet<State> = internal.unblockable

/**
 * The parts of a store id (see `IdempotencyRecord.RecordId`).
 *
 * @since 0.1.0
 * @category utils
 */
export const parseRecordId: typeof internal.parseRecordId = internal.parseRecordId

/**
 * A record as the admin shows it: no fencing token.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecordInfo {
  readonly operation: string
  readonly scope: string | undefined
  readonly key: string
  readonly recordId: string
  readonly status: Status
  readonly state: State
  readonly attempt: number
  readonly leaseUntil: number
  readonly expiresAt: number
  readonly fingerprint: string
  /** Its size in UTF-8 bytes. */
  readonly outcome: { readonly kind: OutcomeKind; readonly bytes: number } | undefined
  /** Only when asked for. */
  readonly outcomeText?: string | undefined
  /** The store's clock when the record was read. */
  readonly readAt: number
}

/**
 * A page of `list`; `cursor` continues it, `undefined` at the end.
 *
 * @since 0.1.0
 * @category models
 */
export interface Page {
  readonly records: ReadonlyArray<RecordInfo>
  readonly cursor: string | undefined
}

/**
 * What `list` looks for.
 *
 * @since 0.1.0
 * @category models
 */
export interface ListQuery {
  readonly state?: State | undefined
  readonly operation?: string | undefined
  readonly olderThan?: Duration.DurationInput | undefined
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
}

/**
 * The count of records of an operation in a state.
 *
 * @since 0.1.0
 * @category models
 */
export type Count = internal.Count

/**
 * A record's identity, as the admin takes it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Target {
  readonly operation: string
  readonly key: string
  readonly scope?: string | undefined
}

/**
 * `unblock` did not delete the record, and says why.
 *
 * @since 0.1.0
 * @category errors
 */
export class UnblockRefused extends Schema.TaggedError<UnblockRefused>("@effect-idempotency/core/UnblockRefused")(
  "UnblockRefused",
  {
    operation: Schema.String,
    keyHash: Schema.String,
    reason: internal.Refusal,
    attempt: Schema.optional(Schema.Number)
  }
) {
  override get message(): string {
    return `the record of ${this.operation} (key hash ${this.keyHash}) was not unblocked: ${this.reason}`
  }
}

/**
 * The key of an admin request is not a valid key.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidTarget extends Schema.TaggedError<InvalidTarget>("@effect-idempotency/core/InvalidTarget")(
  "InvalidTarget",
  { detail: Schema.String }
) {}

/**
 * The store of the context keeps no admin primitives.
 *
 * @since 0.1.0
 * @category errors
 */
export class AdminUnsupported extends Schema.TaggedError<AdminUnsupported>(
  "@effect-idempotency/core/AdminUnsupported"
)("AdminUnsupported", {}) {
  override get message(): string {
    return "the IdempotencyStore of the context does not support the admin service"
  }
}

/**
 * A listed record: its store id and the record.
 *
 * @since 0.1.0
 * @category models
 */
export type StoredRecord = internal.StoredRecord

/**
 * What a store's `unblock` did.
 *
 * @since 0.1.0
 * @category models
 */
export type UnblockResult = internal.UnblockResult

/**
 * What a store implements for the admin service; times are the store's clock.
 *
 * @since 0.1.0
 * @category models
 */
export type AdminStore = internal.AdminStore

/**
 * Whether a store keeps admin primitives.
 *
 * @since 0.1.0
 * @category predicates
 */
export const hasAdmin = (store: unknown): store is { readonly [AdminTypeId]: AdminStore } =>
  Predicate.hasProperty(store, AdminTypeId)

/**
 * The admin service.
 *
 * @since 0.1.0
 * @category tags
 */
export class IdempotencyAdmin extends Context.Tag("@effect-idempotency/core/IdempotencyAdmin")<
  IdempotencyAdmin,
  {
    readonly get: (
      target: Target,
      options?: { readonly outcome?: boolean | undefined }
    ) => Effect.Effect<Option.Option<RecordInfo>, InvalidTarget | StoreFailure>
    readonly list: (query?: ListQuery) => Effect.Effect<Page, StoreFailure>
    readonly unblock: (
      target: Target,
      options: { readonly reason: string; readonly expect: { readonly attempt: number } }
    ) => Effect.Effect<void, UnblockRefused | InvalidTarget | StoreFailure>
    readonly stats: Effect.Effect<ReadonlyArray<Count>, StoreFailure>
    readonly purge: (options?: { readonly limit?: number | undefined }) => Effect.Effect<number, StoreFailure>
  }
>() {}

const DEFAULT_LIMIT = 100
const MAX_LIMIT = 1000

const infoOf = (recordId: string, record: IdempotencyRecord, now: number, withOutcome: boolean): RecordInfo => {
  const { key, operation, scope } = parseRecordId(recordId)
  const columns = record.outcome === undefined ? undefined : outcomeToColumns(record.outcome)
  return {
    operation,
    scope,
    key,
    recordId,
    status: record.status,
    state: stateOf(record, now),
    attempt: record.attempt,
    leaseUntil: record.leaseUntil,
    expiresAt: record.expiresAt,
    fingerprint: record.fingerprint,
    outcome: columns === undefined
      ? undefined
      : { kind: columns.kind, bytes: new TextEncoder().encode(columns.body).byteLength },
    ...(withOutcome && columns !== undefined ? { outcomeText: columns.body } : {}),
    readAt: now
  }
}

/**
 * The admin service over a store's primitives.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (store: IdempotencyStore["Type"], admin: AdminStore): IdempotencyAdmin["Type"] => {
  const idOf = (target: Target) =>
    Effect.mapError(
      IdempotencyKey.validate(target.key),
      (error) => new InvalidTarget({ detail: `the key is not valid: ${error.reason}` })
    ).pipe(Effect.map((key) => makeRecordId({ operation: target.operation, key, scope: target.scope })))
  return {
    get: (target, options) =>
      Effect.flatMap(idOf(target), (id) =>
        Effect.map(
          admin.read(id.value),
          ({ now, record }) => Option.map(record, (r) => infoOf(id.value, r, now, options?.outcome === true))
        )),
    list: (query) => {
      const limit = Math.max(1, Math.min(MAX_LIMIT, Math.floor(query?.limit ?? DEFAULT_LIMIT)))
      return Effect.map(
        admin.list({
          state: query?.state,
          operation: query?.operation,
          olderThanMillis: query?.olderThan === undefined ? undefined : Duration.toMillis(query.olderThan),
          limit,
          cursor: query?.cursor
        }),
        ({ cursor, now, records }) => ({
          records: records.map(({ record, recordId }) => infoOf(recordId, record, now, false)),
          cursor
        })
      )
    },
    unblock: (target, options) =>
      Effect.flatMap(idOf(target), (id) => {
        const keyHash = IdempotencyKey.hash(id.key)
        return Effect.flatMap(admin.unblock({ recordId: id.value, attempt: options.expect.attempt }), (result) =>
          result._tag === "Unblocked"
            ? Effect.logWarning("idempotency: a record was unblocked; the next attempt executes").pipe(
              Effect.annotateLogs({
                "idempotency.operation": target.operation,
                "idempotency.key_hash": keyHash,
                "idempotency.attempt": options.expect.attempt,
                reason: options.reason
              })
            )
            : Effect.fail(
              new UnblockRefused({
                operation: target.operation,
                keyHash,
                reason: result.reason,
                ...(result.attempt === undefined ? {} : { attempt: result.attempt })
              })
            ))
      }),
    stats: admin.stats,
    purge: (options) => store.purgeExpired(options)
  }
}

/**
 * The admin service over the `IdempotencyStore` of the context.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<IdempotencyAdmin, AdminUnsupported, IdempotencyStore> = Layer.effect(
  IdempotencyAdmin,
  Effect.flatMap(
    IdempotencyStore,
    (store) => hasAdmin(store) ? Effect.succeed(make(store, store[AdminTypeId])) : Effect.fail(new AdminUnsupported())
  )
)
