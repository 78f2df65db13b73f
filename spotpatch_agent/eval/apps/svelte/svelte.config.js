// Svelte 5 reads TypeScript in <script lang="ts"> without a preprocessor; svelte-check reads this file.
export default {};
