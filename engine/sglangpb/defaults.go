package sglangpb

// DefaultSamplingParams returns SGLang's own sampling defaults (SamplingParams in
// sglang/srt/sampling/sampling_params.py), every one whose proto3 zero means something else
// set explicitly: temperature 1.0, top_p 1.0, top_k -1 (the whole vocabulary),
// repetition_penalty 1.0, n 1, skip_special_tokens and spaces_between_special_tokens true.
// The remaining fields' defaults are their zero values (min_p, frequency_penalty,
// presence_penalty, min_new_tokens 0; ignore_eos, no_stop_trim false; no stop strings, stop
// ids, constraint or logit bias); max_new_tokens and stream_interval are unset. Each call
// returns a new message, which the caller owns and overwrites with a request's values.
func DefaultSamplingParams() *SamplingParams {
	return &SamplingParams{
		Temperature:                1.0,
		TopP:                       1.0,
		TopK:                       -1,
		RepetitionPenalty:          1.0,
		N:                          1,
		SkipSpecialTokens:          true,
		SpacesBetweenSpecialTokens: true,
	}
}
