/** Starts PGlite on a loopback port; `url` is a connection string for it. */
export declare const startPostgres: () => Promise<{ readonly url: string; readonly stop: () => Promise<void> }>

/** Starts dynalite on a loopback port, with credentials for the SDK's default chain in the environment. */
export declare const startDynamoDb: () => Promise<{ readonly endpoint: string; readonly stop: () => Promise<void> }>
