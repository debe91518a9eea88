# The prompt ids the device check scripts (cuda_check.sh, vulkan_check.sh) decode greedily on the CPU and on
# the device, one per oracle fixture. Sourced, not run.
# shellcheck disable=SC2034  # used by the scripts that source it
declare -A prompts=([olmoe_gqa]=298,275,120,325,190,433,174,242,66,264,152,226,401,133,341,111
                    [olmoe_bf16]=201,271,492,439,33,492,447,448,249,232,139,139,184,200,57,183
                    [olmoe_clip]=54,203,457,107,90,439,404,49,278,9,184,225,294,352,88,396
                    [deepseek_v3]=5,17,99,200,33,150,8,61,120,240,7,77
                    [deepseek_v3_noq]=250,3,64,128,9,31,177,45,2,199,86,140
                    [deepseek_v3_fp8]=12,200,45,3,99,180,64,7,250,31,90,141
                    [deepseek_v3_mtp]=250,3,64,128,9,31,177,45,2,199,86,140
                    [deepseek_v32]=5,17,99,200,33,150,8,61,120,240,7,77
                    [glm_moe_dsa]=250,3,64,128,9,31,177,45,2,199,86,140
                    [kimi_linear]=5,17,99,200,33,150,8,61,120,240,7,77
                    [kimi_k3]=250,3,64,128,9,31,177,45,2,199,86,140
                    [deepseek_v4]=12,200,45,3,99,180,64,7,250,31,90,141,17,77,5,60,33,150,8,61
                    [deepseek_v4_orig]=250,3,64,128,9,31,177,45,2,199,86,140,5,17,99,200,33,150,8,61)
