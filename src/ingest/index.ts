/** Getting documents in: folders, text files, JSONL and OpenAI Batch files -> items and jobs. */
export { enqueue, MAX_KEPT_REJECTIONS, type EnqueueOptions, type EnqueueSummary } from './enqueue.js';
export { parseTemplate, MissingValueError, type Template, type TemplateValues } from './template.js';
export { makeRenderer, requestBody, type RequestOptions } from './render.js';
export { globMatcher, globToRegExp, type PathMatcher } from './glob.js';
export { DEFAULT_MAX_DOC_BYTES, type Document, type Rejection } from './types.js';
