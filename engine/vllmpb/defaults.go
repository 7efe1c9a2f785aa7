package vllmpb

// DefaultSamplingParams returns vLLM's own sampling defaults (SamplingParams in
// vllm/sampling_params.py), every one whose proto3 zero or absence means something else set
// explicitly: temperature 1.0 (present), top_p 1.0, top_k 0 (disabled), repetition_penalty
// 1.0, n 1, skip_special_tokens and spaces_between_special_tokens true. The remaining fields'
// defaults are their zero values (min_p, frequency_penalty, presence_penalty, min_tokens 0;
// ignore_eos, include_stop_str_in_output false; no stop strings, stop ids, constraint or
// logit bias); max_tokens, seed, logprobs, prompt_logprobs and truncate_prompt_tokens are
// unset. Each call returns a new message, which the caller owns and overwrites with a
// request's values.
func DefaultSamplingParams() *SamplingParams {
	temperature := float32(1.0)
	return &SamplingParams{
		Temperature:                &temperature,
		TopP:                       1.0,
		TopK:                       0,
		RepetitionPenalty:          1.0,
		N:                          1,
		SkipSpecialTokens:          true,
		SpacesBetweenSpecialTokens: true,
	}
}
