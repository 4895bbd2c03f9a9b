// Package oflm runs MiniCPM5-2B on the NPU through OpenFlowLM-Next
// (`oflm`), the one route that decodes this 42-layer model on an XDNA 2
// NPU today (issue 33; research/oflm.md). It sits beside npu/flm: the two
// use different executables, folders and registries.
//
//   - Locator finds oflm: a configured path, PATH, the packaged locations
//     (/opt/openflowlm/bin/oflm, /usr/bin/oflm; C:\Program Files\oflm and
//     the MSI's HKLM\Software\OpenFlowLM\oflm\InstallFolder);
//     Version and Validate run `oflm version --json` and
//     `oflm validate --json`; Check and Assess combine validate with NPU
//     Chat's own checks (npu/check: device, render group, memlock).
//   - Layout is oflm's folder ($OFLM_MODEL_PATH, the parent of models/,
//     else ~/.config/oflm or %USERPROFILE%\.oflm): Register writes the
//     user registry entry for a prepared model folder (family llama3,
//     context from the kernel manifest's max_ctx_default), FindKernels
//     finds the open kernel set where oflm looks, ServeEnv is the
//     environment `oflm serve` needs (OFLM_* and the legacy FLM_*).
//   - Backend is a backend.Backend: `oflm serve <tag> --host 127.0.0.1
//     --port <free> --ctx-len <n> --cors 0 --quiet` as a child that dies with NPU
//     Chat (npu/childproc), healthy when its port answers and GET /api/ps
//     names the tag ("model-faker" is a failed load). It always streams,
//     sends a tight max_tokens, cuts the text at <|im_end|>,
//     <|endoftext|> and the request's stop strings (oflm reads no "stop")
//     and closes the connection there, which ends the NPU job.
//
// The weights' conversion to the llama-family container oflm's open
// engine reads is models/oflm's; this package takes the prepared folder.
// What is verified here with the fake (npu/oflm/fakeoflm) and what only a
// Ryzen AI machine can confirm is in docs/oflm-route.md.
package oflm
