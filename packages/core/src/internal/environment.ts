/**
 * Where the program runs, as far as a process-local store cares: read from globals that exist on
 * every runtime, never from `process` unless it is there (a Worker has none without `nodejs_compat`).
 */

/** A deployed runtime where a memory store protects nothing, by the name the refusal shows. */
export type Production = "AWS Lambda" | "Netlify Functions" | "Cloudflare Workers" | "NODE_ENV=production"

/** The environment variables where the runtime has them, else none. */
export type Env = Readonly<Record<string, string | undefined>>

/** What the detector reads: the environment and the two globals that name a runtime. */
export interface Probe {
  readonly env: Env
  readonly userAgent: string | undefined
  readonly netlify: boolean
}

const readEnv = (): Env => {
  try {
    const process = (globalThis as { readonly process?: { readonly env?: unknown } }).process
    const env = process?.env
    return typeof env === "object" && env !== null ? env as Env : {}
  } catch {
    // a runtime whose `process.env` throws on access (a sandbox) has no variables to read
    return {}
  }
}

/** The probe of the running program. */
export const probe = (): Probe => {
  const navigator = (globalThis as { readonly navigator?: { readonly userAgent?: unknown } }).navigator
  const userAgent = navigator?.userAgent
  return {
    env: readEnv(),
    userAgent: typeof userAgent === "string" ? userAgent : undefined,
    netlify: typeof (globalThis as { readonly Netlify?: unknown }).Netlify === "object"
  }
}

const set = (value: string | undefined): boolean => value !== undefined && value !== ""

/**
 * The deployed runtime the probe shows, or `undefined`. A local emulator (`netlify dev`, `sam local`)
 * is not one: it serves one process, on a developer's machine.
 */
export const production = (probe: Probe): Production | undefined => {
  const { env } = probe
  if (probe.userAgent === "Cloudflare-Workers") return "Cloudflare Workers"
  // Netlify runs its functions on AWS Lambda: it is named first, by its runtime variables or its global
  if (
    env.NETLIFY_DEV !== "true" && (probe.netlify || env.NETLIFY === "true" || (set(env.SITE_ID) && set(env.SITE_NAME)))
  ) {
    return "Netlify Functions"
  }
  if (
    env.AWS_SAM_LOCAL !== "true" &&
    (set(env.AWS_LAMBDA_FUNCTION_NAME) || env.AWS_EXECUTION_ENV?.startsWith("AWS_Lambda_") === true)
  ) {
    return "AWS Lambda"
  }
  if (env.NODE_ENV === "production") return "NODE_ENV=production"
  return undefined
}
