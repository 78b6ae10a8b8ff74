/**
 * Encryption at rest: a wrapper of any `IdempotencyStore` that seals every recorded outcome with
 * AES-256-GCM (Node's `crypto` module where the runtime hands it over, else WebCrypto, so it runs
 * wherever `globalThis.crypto.subtle` does; both give the same bytes), bound to its record,
 * and optionally keys the request fingerprints with HMAC-SHA-256 (README.md#encryption-at-rest).
 *
 * @example
 * ```ts
 * import { IdempotencyEncryption, IdempotencyStore } from "@effect-idempotency/core"
 * import { Layer } from "effect"
 *
 * // IDEMPOTENCY_KEYS="k2:<base64 of 32 bytes>,k1:<base64 of 32 bytes>": k2 seals, both open
 * const StoreLive = IdempotencyEncryption.layerConfig({ keys: IdempotencyEncryption.keysConfig() }).pipe(
 *   Layer.provide(IdempotencyStore.layerMemory)
 * )
 * ```
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as IdempotencyAdmin from "./IdempotencyAdmin.js"
import { isIdempotencyError, StoreError } from "./IdempotencyError.js"
import type { IdempotencyRecord, StoredOutcome as Outcome } from "./IdempotencyRecord.js"
import { canTakeOver, ReserveResult, StoredOutcome } from "./IdempotencyRecord.js"
import { IdempotencyStore } from "./IdempotencyStore.js"
import * as Cipher from "./internal/cipher.js"
import type { AdminStore } from "./store/admin.js"

/**
 * A named secret key: 32 bytes, as bytes or as base64 (standard or URL-safe) text.
 *
 * @since 0.1.0
 * @category models
 */
export interface Key {
  /** 1 to 32 characters of `A-Z a-z 0-9 _ -`; written in every envelope it seals. */
  readonly id: string
  readonly key: Redacted.Redacted<string | Uint8Array>
}

/**
 * Options of the encryption wrapper.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The first seals; every listed key opens (rotation). At least one. */
  readonly keys: ReadonlyArray<Key>
  /** HMAC-SHA-256 keys for fingerprints, the first signs, every listed one verifies. Default: plain SHA-256. */
  readonly fingerprintKeys?: ReadonlyArray<Key> | undefined
  /** Whether outcomes recorded before encryption was turned on are replayed as they are. Default false. */
  readonly acceptPlaintext?: boolean | undefined
}

/**
 * The version tag that starts every envelope.
 *
 * @since 0.1.0
 * @category constants
 */
export const VERSION = "v1"

/**
 * The prefix of keyed fingerprints: `hmac-sha256:<keyId>:<hex>`.
 *
 * @since 0.1.0
 * @category constants
 */
export const FINGERPRINT_ALGORITHM = "hmac-sha256"

/**
 * The characters of an envelope beyond the base64url of the plaintext: `v1.`, the key id, two dots,
 * the 16-character IV, and the 16-byte tag (22 characters).
 *
 * @since 0.1.0
 * @category utils
 */
export const envelopeLength = (keyId: string, plaintextBytes: number): number =>
  VERSION.length + 1 + keyId.length + 1 + 16 + 1 + Math.ceil(((plaintextBytes + 16) * 4) / 3)

/**
 * The key material given is not usable: never shows the material.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidKeys extends Schema.TaggedError<InvalidKeys>("@effect-idempotency/core/InvalidKeys")(
  "InvalidKeys",
  { keyId: Schema.optional(Schema.String), reason: Schema.String }
) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `invalid encryption keys${this.keyId === undefined ? "" : ` (key "${this.keyId}")`}: ${this.reason}`
  }
}

/**
 * Why a record could not be opened.
 *
 * @since 0.1.0
 * @category models
 */
export const UnreadableReason = Schema.Literal(
  /** Sealed with a key that is no longer listed. */
  "UnknownKey",
  /** Not an envelope this version writes. */
  "Malformed",
  /** The tag does not verify: altered, moved to another record, or another key under the same id. */
  "Unauthentic",
  /** Recorded before encryption was turned on, and `acceptPlaintext` is off. */
  "Plaintext"
)

/**
 * @since 0.1.0
 * @category models
 */
export type UnreadableReason = typeof UnreadableReason.Type

/**
 * @since 0.1.0
 * @category type ids
 */
export const RecordUnreadableTypeId: unique symbol = Symbol.for("@effect-idempotency/core/RecordUnreadable")

/**
 * A record's sealed data could not be opened. The store's call fails with a `StoreError` whose
 * `cause` is this error (`unreadableOf` finds it): the engine fails the caller and never runs the
 * downstream again.
 *
 * @since 0.1.0
 * @category errors
 */
export class RecordUnreadable extends Schema.TaggedError<RecordUnreadable>(
  "@effect-idempotency/core/RecordUnreadable"
)("RecordUnreadable", {
  recordId: Schema.String,
  keyId: Schema.optional(Schema.String),
  reason: UnreadableReason
}) {
  /**
   * @since 0.1.0
   */
  declare readonly [RecordUnreadableTypeId]: typeof RecordUnreadableTypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    const key = this.keyId === undefined ? "" : ` (key "${this.keyId}")`
    return `the record ${this.recordId} cannot be opened${key}: ${this.reason}`
  }
}

Object.defineProperty(RecordUnreadable.prototype, RecordUnreadableTypeId, { value: RecordUnreadableTypeId })

/**
 * Whether a value is a `RecordUnreadable`, by type id.
 *
 * @since 0.1.0
 * @category refinements
 */
export const isRecordUnreadable = (u: unknown): u is RecordUnreadable =>
  Predicate.hasProperty(u, RecordUnreadableTypeId)

/**
 * The `RecordUnreadable` of a failure: the error itself, or the cause of a `StoreError`.
 *
 * @since 0.1.0
 * @category utils
 */
export const unreadableOf = (error: unknown): Option.Option<RecordUnreadable> =>
  isRecordUnreadable(error)
    ? Option.some(error)
    : isIdempotencyError(error) && error._tag === "StoreError" && isRecordUnreadable(error.cause)
    ? Option.some(error.cause)
    : Option.none()

// ---------------------------------------------------------------------------------------------------------------------
// keys

const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/
const KEY_BYTES = 32
const IV_BYTES = 12
const TAG_BYTES = 16

const keyBytes = (key: Key): Either.Either<Uint8Array<ArrayBuffer>, InvalidKeys> => {
  if (!KEY_ID.test(key.id)) {
    return Either.left(new InvalidKeys({ reason: "a key id is 1 to 32 characters of A-Z a-z 0-9 _ -" }))
  }
  const material = Redacted.value(key.key)
  const bytes = typeof material === "string"
    ? Cipher.base64url.decode(material.trim().replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, ""))
    : new Uint8Array(material)
  if (bytes === undefined) return Either.left(new InvalidKeys({ keyId: key.id, reason: "the key is not base64" }))
  if (bytes.length !== KEY_BYTES) {
    return Either.left(
      new InvalidKeys({ keyId: key.id, reason: `the key is ${bytes.length} bytes, not ${KEY_BYTES}` })
    )
  }
  return Either.right(bytes)
}

const checked = (
  keys: ReadonlyArray<Key>,
  what: string
): Either.Either<Array<Uint8Array<ArrayBuffer>>, InvalidKeys> => {
  if (keys.length === 0) return Either.left(new InvalidKeys({ reason: `no ${what} key is listed` }))
  const seen = new Set<string>()
  const out: Array<Uint8Array<ArrayBuffer>> = []
  for (const key of keys) {
    const bytes = keyBytes(key)
    if (Either.isLeft(bytes)) return Either.left(bytes.left)
    if (seen.has(key.id)) return Either.left(new InvalidKeys({ keyId: key.id, reason: "the id is listed twice" }))
    seen.add(key.id)
    out.push(bytes.right)
  }
  return Either.right(out)
}

const importKeys = <K>(
  keys: ReadonlyArray<Key>,
  what: string,
  importKey: (raw: Uint8Array<ArrayBuffer>) => Effect.Effect<K, unknown>
): Effect.Effect<Map<string, K>, InvalidKeys> =>
  Effect.flatMap(checked(keys, what), (bytes) =>
    Effect.mapError(
      Effect.map(Effect.forEach(bytes, importKey), (imported) => new Map(keys.map((key, i) => [key.id, imported[i]!]))),
      () => new InvalidKeys({ reason: "the runtime's crypto refused the key material" })
    ))

/**
 * Keys from one `Config` value, `id:base64key,id:base64key` (the first seals), read as `Redacted`:
 * a malformed list or key is a `ConfigError` that never shows the material.
 *
 * @since 0.1.0
 * @category config
 */
export const keysConfig = (name = "IDEMPOTENCY_KEYS"): Config.Config<ReadonlyArray<Key>> =>
  Config.mapOrFail(Config.redacted(name), (value) => {
    const keys: Array<Key> = []
    for (const entry of Redacted.value(value).split(",")) {
      const at = entry.indexOf(":")
      if (at < 0) return Either.left(ConfigError.InvalidData([name], "expected id:base64key, comma-separated"))
      keys.push({ id: entry.slice(0, at).trim(), key: Redacted.make(entry.slice(at + 1).trim()) })
    }
    return Either.mapLeft(
      checked(keys, "encryption"),
      (error) => ConfigError.InvalidData([name], error.message)
    ).pipe(Either.map(() => keys))
  })

// ---------------------------------------------------------------------------------------------------------------------
// sealing

/**
 * The keys of a wrapper, imported once; `seal`, `open` and `sign` are what the wrapper calls.
 *
 * @since 0.1.0
 * @category models
 */
export interface Sealer {
  /** The envelope of `plaintext` for the record `recordId`, the attempt `token` and the outcome `kind`. */
  readonly seal: (
    plaintext: string,
    binding: { readonly recordId: string; readonly token: string; readonly kind: string }
  ) => Effect.Effect<string, StoreError>
  /** The plaintext of an envelope, or why it cannot be opened. */
  readonly open: (
    envelope: string,
    binding: { readonly recordId: string; readonly token: string; readonly kind: string }
  ) => Effect.Effect<string, RecordUnreadable>
  /** The keyed fingerprint of a plain one; `undefined` without fingerprint keys. */
  readonly sign: ((fingerprint: string, keyId?: string) => Effect.Effect<string, StoreError>) | undefined
  /** The ids `sign` accepts. */
  readonly fingerprintKeyIds: ReadonlySet<string>
  /** See `Options.acceptPlaintext`. */
  readonly acceptPlaintext: boolean
}

const encoder = new TextEncoder()
const decoder = new TextDecoder("utf-8", { fatal: true })

// the record, the attempt and the kind: a ciphertext opens only where it was sealed
const associated = (
  keyId: string,
  binding: { readonly recordId: string; readonly token: string; readonly kind: string }
) => encoder.encode(JSON.stringify([VERSION, keyId, binding.kind, binding.recordId, binding.token]))

const HEX = Array.from("0123456789abcdef")

/**
 * Imports the keys of `options` (`InvalidKeys` for material WebCrypto cannot use).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeSealer = (options: Options): Effect.Effect<Sealer, InvalidKeys> =>
  Effect.gen(function*() {
    // Node's crypto module where the runtime hands it over (synchronous), else WebCrypto: the same bytes
    const backend = Cipher.preferred()
    const { decode: fromBase64url, encode: toBase64url } = backend.base64url
    const keys = yield* importKeys(options.keys, "encryption", backend.aes)
    const sealingId = options.keys[0]!.id
    const sealing = keys.get(sealingId)!
    const macs = options.fingerprintKeys === undefined
      ? undefined
      : yield* importKeys(options.fingerprintKeys, "fingerprint", backend.hmac)
    const signingId = options.fingerprintKeys?.[0]?.id
    const seal: Sealer["seal"] = (plaintext, binding) =>
      Effect.try(() => globalThis.crypto.getRandomValues(new Uint8Array(IV_BYTES))).pipe(
        Effect.flatMap((iv) =>
          Effect.map(
            sealing.encrypt(iv, associated(sealingId, binding), encoder.encode(plaintext)),
            (sealed) => `${VERSION}.${sealingId}.${toBase64url(iv)}.${toBase64url(sealed)}`
          )
        ),
        Effect.mapError((cause) => new StoreError({ method: "complete", cause }))
      )
    const open: Sealer["open"] = (envelope, binding) => {
      const unreadable = (reason: UnreadableReason, keyId?: string) =>
        Effect.fail(
          new RecordUnreadable({ recordId: binding.recordId, reason, ...(keyId === undefined ? {} : { keyId }) })
        )
      const parts = envelope.split(".")
      if (parts.length !== 4 || parts[0] !== VERSION || !KEY_ID.test(parts[1]!)) return unreadable("Malformed")
      const keyId = parts[1]!
      const key = keys.get(keyId)
      if (key === undefined) return unreadable("UnknownKey", keyId)
      const iv = fromBase64url(parts[2]!)
      const data = fromBase64url(parts[3]!)
      if (iv === undefined || iv.length !== IV_BYTES || data === undefined || data.length < TAG_BYTES) {
        return unreadable("Malformed", keyId)
      }
      return Effect.flatMap(
        Effect.mapError(key.decrypt(iv, associated(keyId, binding), data), () => "Unauthentic" as const),
        (plain) => Effect.try({ try: () => decoder.decode(plain), catch: () => "Malformed" as const })
      ).pipe(Effect.catchAll((reason) => unreadable(reason, keyId)))
    }
    const sign: Sealer["sign"] = macs === undefined ?
      undefined :
      (fingerprint, keyId = signingId!) =>
        Effect.suspend(() => {
          const mac = macs.get(keyId)
          return mac === undefined
            ? Effect.fail(new Error("no fingerprint key of that id is listed"))
            : mac.sign(encoder.encode(fingerprint))
        }).pipe(
          Effect.map((mac) => {
            let hex = ""
            for (const byte of mac) hex += HEX[byte >>> 4]! + HEX[byte & 15]!
            return `${FINGERPRINT_ALGORITHM}:${keyId}:${hex}`
          }),
          Effect.mapError((cause) => new StoreError({ method: "reserve", cause }))
        )
    return {
      seal,
      open,
      sign,
      fingerprintKeyIds: new Set(macs === undefined ? [] : macs.keys()),
      acceptPlaintext: options.acceptPlaintext === true
    }
  })

const bodyOf = (outcome: Outcome): string | undefined =>
  outcome._tag === "Success" ? outcome.value : outcome._tag === "Failure" ? outcome.error : undefined

const withBody = (outcome: Outcome, body: string): Outcome =>
  outcome._tag === "Success" ? StoredOutcome.Success({ value: body }) : StoredOutcome.Failure({ error: body })

const isEnvelope = (body: string) => body.startsWith(`${VERSION}.`)

/** The outcome of a record as it was before sealing. */
const openRecord = (
  sealer: Sealer,
  recordId: string,
  record: IdempotencyRecord
): Effect.Effect<IdempotencyRecord, RecordUnreadable> => {
  const outcome = record.outcome
  const body = outcome === undefined ? undefined : bodyOf(outcome)
  if (body === undefined) return Effect.succeed(record)
  if (!isEnvelope(body)) {
    // JSON text never starts with `v1.`: this body was written before encryption
    return sealer.acceptPlaintext
      ? Effect.succeed(record)
      : Effect.fail(new RecordUnreadable({ recordId, reason: "Plaintext" }))
  }
  return Effect.map(
    sealer.open(body, { recordId, token: record.token, kind: outcome!._tag }),
    (plain): IdempotencyRecord => ({ ...record, outcome: withBody(outcome!, plain) })
  )
}

const asStoreError = (method: string) => (error: RecordUnreadable) => new StoreError({ method, cause: error })

const keyIdOf = (fingerprint: string): string | undefined => {
  if (!fingerprint.startsWith(`${FINGERPRINT_ALGORITHM}:`)) return undefined
  const end = fingerprint.indexOf(":", FINGERPRINT_ALGORITHM.length + 1)
  return end < 0 ? undefined : fingerprint.slice(FINGERPRINT_ALGORITHM.length + 1, end)
}

/**
 * Wraps `store`: outcomes sealed on `complete` and opened on `reserve` and `get`, fingerprints keyed
 * when `fingerprintKeys` are given. The admin primitives pass through: they show sealed outcomes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  store: IdempotencyStore["Type"],
  options: Options
): Effect.Effect<IdempotencyStore["Type"], InvalidKeys> =>
  Effect.map(makeSealer(options), (sealer) => wrap(store, sealer))

/**
 * Wraps `store` with the keys of `sealer` (see `make`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const wrap = (store: IdempotencyStore["Type"], sealer: Sealer): IdempotencyStore["Type"] => {
  const sign = sealer.sign
  /**
   * The found record with the caller's plain fingerprint where its own matches it (keyed under any
   * listed key, or plain from before the keys), and the stored fingerprint that matched (`""`: none).
   */
  const matched = (
    id: string,
    existing: { readonly record: IdempotencyRecord; readonly now: number },
    plain: string
  ): Effect.Effect<{ readonly record: IdempotencyRecord; readonly under: string }, StoreError | RecordUnreadable> => {
    const stored = existing.record.fingerprint
    const same = (under: string) => ({ record: { ...existing.record, fingerprint: plain }, under })
    const other = { record: existing.record, under: "" }
    const keyId = keyIdOf(stored)
    if (keyId === undefined) return Effect.succeed(stored === plain ? same(plain) : other)
    if (sign === undefined || !sealer.fingerprintKeyIds.has(keyId)) {
      return Effect.fail(new RecordUnreadable({ recordId: id, keyId, reason: "UnknownKey" }))
    }
    return Effect.map(sign(plain, keyId), (signed) => signed === stored ? same(stored) : other)
  }

  const reserve: IdempotencyStore["Type"]["reserve"] = (request) =>
    Effect.gen(function*() {
      const signed = sign === undefined ? request.fingerprint : yield* sign(request.fingerprint)
      const first = yield* store.reserve(signed === request.fingerprint ? request : { ...request, fingerprint: signed })
      if (first._tag === "Reserved") return first
      let found = yield* matched(request.id.value, first, request.fingerprint)
      let now = first.now
      // the same request under a fingerprint key since rotated (or from before the keys): the store
      // compares fingerprints itself, so the takeover is asked for under the one it keeps
      if (
        found.under !== "" && found.under !== signed &&
        canTakeOver(first.record, { fingerprint: first.record.fingerprint, takeover: request.takeover }, now)
      ) {
        const again = yield* store.reserve({ ...request, fingerprint: found.under })
        if (again._tag === "Reserved") return again
        found = yield* matched(request.id.value, again, request.fingerprint)
        now = again.now
      }
      const record = yield* openRecord(sealer, request.id.value, found.record)
      return ReserveResult.Existing({ record, now })
    }).pipe(Effect.mapError((error) => isRecordUnreadable(error) ? asStoreError("reserve")(error) : error))

  const wrapped: IdempotencyStore["Type"] = {
    reserve,
    complete: (request) => {
      const body = bodyOf(request.outcome)
      if (body === undefined) return store.complete(request)
      return Effect.flatMap(
        sealer.seal(body, { recordId: request.id.value, token: request.token, kind: request.outcome._tag }),
        (sealed) => store.complete({ ...request, outcome: withBody(request.outcome, sealed) })
      )
    },
    release: store.release,
    markFailed: store.markFailed,
    extend: store.extend,
    get: (id) =>
      Effect.flatMap(store.get(id), (record) =>
        Option.isNone(record)
          ? Effect.succeed(record)
          : Effect.mapError(
            Effect.map(openRecord(sealer, id.value, record.value), Option.some),
            asStoreError("get")
          )),
    purgeExpired: store.purgeExpired
  }
  return IdempotencyAdmin.hasAdmin(store)
    ? Object.assign(wrapped, { [IdempotencyAdmin.AdminTypeId]: store[IdempotencyAdmin.AdminTypeId] })
    : wrapped
}

/**
 * Wraps the `IdempotencyStore` of the context (see `make`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<IdempotencyStore, InvalidKeys, IdempotencyStore> =>
  Layer.effect(IdempotencyStore, Effect.flatMap(IdempotencyStore, (store) => make(store, options)))

/**
 * Wraps the `IdempotencyStore` of the context, with options read from `Config`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  config: Config.Config.Wrap<Options>
): Layer.Layer<IdempotencyStore, InvalidKeys | ConfigError.ConfigError, IdempotencyStore> =>
  Layer.unwrapEffect(Effect.map(Config.unwrap(config), layer))

/**
 * Admin primitives that open sealed outcomes: `IdempotencyAdmin.get(target, { outcome: true })`
 * then shows the plaintext. A record that cannot be opened fails the read with a `StoreError`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const openingAdmin = (admin: AdminStore, sealer: Sealer): AdminStore => ({
  ...admin,
  read: (recordId) =>
    Effect.flatMap(admin.read(recordId), ({ now, record }) =>
      Option.isNone(record)
        ? Effect.succeed({ now, record })
        : Effect.mapError(
          Effect.map(openRecord(sealer, recordId, record.value), (opened) => ({ now, record: Option.some(opened) })),
          asStoreError("read")
        ))
})

/**
 * The admin service over the `IdempotencyStore` of the context, opening outcomes with the keys of
 * `options`; `IdempotencyAdmin.layer`, without the keys, shows the same records sealed.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerAdmin = (
  options: Options
): Layer.Layer<IdempotencyAdmin.IdempotencyAdmin, IdempotencyAdmin.AdminUnsupported | InvalidKeys, IdempotencyStore> =>
  Layer.effect(
    IdempotencyAdmin.IdempotencyAdmin,
    Effect.gen(function*() {
      const store = yield* IdempotencyStore
      if (!IdempotencyAdmin.hasAdmin(store)) return yield* new IdempotencyAdmin.AdminUnsupported()
      const sealer = yield* makeSealer(options)
      return IdempotencyAdmin.make(store, openingAdmin(store[IdempotencyAdmin.AdminTypeId], sealer))
    })
  )
