/**
 * The endpoint the offline mock provider's lanes, runs and batch submissions are recorded under. Its
 * own module: the stores read it, and must not load the providers for it (`llmq status` stays light).
 */
export const MOCK_BASE_URL = 'mock';
