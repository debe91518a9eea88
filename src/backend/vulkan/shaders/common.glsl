// Shared by every shader: the grid helpers and float constants.
// Workgroups per dispatch dimension that every device offers (maxComputeWorkGroupCount minimum): large
// element counts loop over the grid instead of launching more groups.
const uint kMaxGroups = 65535u;
#define kNegInf uintBitsToFloat(0xff800000u)
#define kNan uintBitsToFloat(0x7fc00000u)
// An index no key reaches: attn_scores' k_split and attn_mix's v_split when keys have one source.
const uint kNoSplit = 0xffffffffu;

// The index of this workgroup in a 2-D grid that flattens gx * gy groups.
uint group_index() {
    return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
}
