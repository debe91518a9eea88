// The Metal device (host.h) on Apple: the generated library (embedded in the binary, compiled at start
// with safe math), pipelines with function constants, a serial compute encoder, blits, one command buffer
// at a time. Built with ARC on Apple only; untested until `coli test-ops --backend metal` runs on a Mac
// (README, "Metal").
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include <algorithm>
#include <string>

#include "backend/metal/host.h"
#include "backend/metal/library_source.h"
#include "core/error.h"

namespace coli::metal {

namespace {

std::string text_of(NSError* e) {
    return e != nil ? std::string([[e localizedDescription] UTF8String]) : std::string("no reason given");
}

class AppleBuffer final : public Buffer {
public:
    explicit AppleBuffer(id<MTLBuffer> b) : b_(b) {}
    uint64_t length() const override { return b_.length; }
    void* contents() const override { return b_.storageMode == MTLStorageModeShared ? b_.contents : nullptr; }
    id<MTLBuffer> mtl() const { return b_; }

private:
    id<MTLBuffer> b_;
};

id<MTLBuffer> mtl_of(const BufferPtr& b) {
    return static_cast<const AppleBuffer&>(*b).mtl();
}

struct ApplePipeline {
    id<MTLComputePipelineState> state;
};

MTLDataType data_type_of(MetalConstantType t) {
    switch (t) {
        case MetalConstantType::u32:
            return MTLDataTypeUInt;
        case MetalConstantType::i32:
            return MTLDataTypeInt;
        case MetalConstantType::f32:
            return MTLDataTypeFloat;
        case MetalConstantType::boolean:
            return MTLDataTypeBool;
    }
    return MTLDataTypeUInt;
}

class AppleDevice final : public Device {
public:
    AppleDevice(id<MTLDevice> device, id<MTLLibrary> library)
        : device_(device), library_(library), queue_([device newCommandQueue]) {
        check(queue_ != nil, "metal: the device gave no command queue");
    }

    std::string name() const override { return [device_.name UTF8String]; }
    uint64_t recommended_working_set() const override { return device_.recommendedMaxWorkingSetSize; }
    uint64_t threadgroup_memory() const override { return device_.maxThreadgroupMemoryLength; }
    // Apple GPUs run SIMD-groups of 32; a pipeline reports it (threadExecutionWidth), the device does not.
    uint32_t thread_execution_width() const override { return kMetalSimdWidth; }
    bool unified_memory() const override { return device_.hasUnifiedMemory; }

    BufferPtr buffer_new(uint64_t bytes, Storage storage) override {
        const MTLResourceOptions options =
            storage == Storage::shared ? MTLResourceStorageModeShared : MTLResourceStorageModePrivate;
        id<MTLBuffer> b = [device_ newBufferWithLength:std::max<uint64_t>(bytes, 1) options:options];
        if (b == nil) throw OutOfMemory(fmt::format("metal: allocating {} bytes failed", bytes));
        return std::make_shared<AppleBuffer>(b);
    }

    void copy(const BufferPtr& src, uint64_t src_offset, const BufferPtr& dst, uint64_t dst_offset,
              uint64_t bytes) override {
        id<MTLBlitCommandEncoder> blit = blit_begin();
        [blit copyFromBuffer:mtl_of(src)
                 sourceOffset:src_offset
                     toBuffer:mtl_of(dst)
            destinationOffset:dst_offset
                         size:bytes];
    }

    void fill(const BufferPtr& dst, uint8_t value) override {
        id<MTLBlitCommandEncoder> blit = blit_begin();
        [blit fillBuffer:mtl_of(dst) range:NSMakeRange(0, mtl_of(dst).length) value:value];
    }

    void commit_and_wait() override {
        if (commands_ == nil) return;
        encoder_end();
        [commands_ commit];
        [commands_ waitUntilCompleted];
        const MTLCommandBufferStatus status = commands_.status;
        NSError* error = commands_.error;
        commands_ = nil;
        check(status == MTLCommandBufferStatusCompleted, "metal: a command buffer failed: {}",
              text_of(error));
    }

protected:
    std::shared_ptr<void> pipeline_make(const MetalKernel& k, std::span<const ConstantValue> constants,
                                        const std::array<uint32_t, 3>& threads) override {
        MTLFunctionConstantValues* values = [MTLFunctionConstantValues new];
        for (const MetalConstant& c : k.constants) {
            const uint32_t bits = constant_bits(c, constants);
            if (c.type == MetalConstantType::boolean) {
                const bool b = bits != 0;
                [values setConstantValue:&b type:MTLDataTypeBool atIndex:c.index];
            } else {
                [values setConstantValue:&bits type:data_type_of(c.type) atIndex:c.index];
            }
        }
        NSError* error = nil;
        NSString* entry = [NSString stringWithUTF8String:std::string(k.entry).c_str()];
        id<MTLFunction> fn = [library_ newFunctionWithName:entry constantValues:values error:&error];
        check(fn != nil, "metal: kernel '{}' ({}) cannot be specialized: {}", k.name, k.entry,
              text_of(error));
        id<MTLComputePipelineState> state = [device_ newComputePipelineStateWithFunction:fn error:&error];
        check(state != nil, "metal: kernel '{}' gives no pipeline: {}", k.name, text_of(error));
        const uint64_t wanted = uint64_t(threads[0]) * threads[1] * threads[2];
        check(state.maxTotalThreadsPerThreadgroup >= wanted,
              "metal: kernel '{}' needs {} threads per threadgroup, this device runs it with {} at most",
              k.name, wanted, state.maxTotalThreadsPerThreadgroup);
        check(!k.simdgroup || state.threadExecutionWidth == kMetalSimdWidth,
              "metal: kernel '{}' assumes SIMD-groups of {}, the pipeline has {}", k.name, kMetalSimdWidth,
              state.threadExecutionWidth);
        auto p = std::make_shared<ApplePipeline>();
        p->state = state;
        return p;
    }

    void dispatch_encode(const Pipeline& p, const DispatchArgs& args) override {
        id<MTLComputeCommandEncoder> enc = compute_begin();
        [enc setComputePipelineState:static_cast<const ApplePipeline*>(p.native.get())->state];
        for (uint32_t s = 0; s < kMetalMaxBuffers; ++s)
            if (args.buffers[s]) [enc setBuffer:mtl_of(args.buffers[s]) offset:0 atIndex:s];
        if (!args.push.empty())
            [enc setBytes:args.push.data() length:args.push.size() atIndex:kMetalPushSlot];
        [enc dispatchThreadgroups:MTLSizeMake(args.groups[0], args.groups[1], args.groups[2])
            threadsPerThreadgroup:MTLSizeMake(p.threads[0], p.threads[1], p.threads[2])];
    }

private:
    id<MTLCommandBuffer> commands() {
        if (commands_ == nil) commands_ = [queue_ commandBuffer];
        check(commands_ != nil, "metal: the queue gave no command buffer");
        return commands_;
    }
    // A serial compute encoder: each dispatch sees the writes of those before it, as the Vulkan path's
    // barriers give.
    id<MTLComputeCommandEncoder> compute_begin() {
        if (compute_ == nil) {
            encoder_end();
            compute_ = [commands() computeCommandEncoderWithDispatchType:MTLDispatchTypeSerial];
        }
        return compute_;
    }
    id<MTLBlitCommandEncoder> blit_begin() {
        if (blit_ == nil) {
            encoder_end();
            blit_ = [commands() blitCommandEncoder];
        }
        return blit_;
    }
    void encoder_end() {
        if (compute_ != nil) [compute_ endEncoding];
        if (blit_ != nil) [blit_ endEncoding];
        compute_ = nil;
        blit_ = nil;
    }

    id<MTLDevice> device_;
    id<MTLLibrary> library_;
    id<MTLCommandQueue> queue_;
    id<MTLCommandBuffer> commands_ = nil;         // being encoded, nil until the first command
    id<MTLComputeCommandEncoder> compute_ = nil;  // the open compute encoder, or nil
    id<MTLBlitCommandEncoder> blit_ = nil;        // the open blit encoder, or nil
};

}  // namespace

std::unique_ptr<Device> metal_device_open() {
    @autoreleasepool {
        id<MTLDevice> device = MTLCreateSystemDefaultDevice();
        check(device != nil, "metal: no Metal device (MTLCreateSystemDefaultDevice returned none)");
        MTLCompileOptions* options = [MTLCompileOptions new];
        options.languageVersion = MTLLanguageVersion2_3;  // the generator's target (SIMD-group functions)
        // No fast math: results stay those the CPU's reference order gives, within the Vulkan tolerances.
        if (@available(macOS 15.0, *)) {
            options.mathMode = MTLMathModeSafe;
        } else {
            options.fastMathEnabled = NO;
        }
        const std::string_view source = metal_library_source();
        NSString* text = [[NSString alloc] initWithBytes:source.data()
                                                  length:source.size()
                                                encoding:NSUTF8StringEncoding];
        NSError* error = nil;
        id<MTLLibrary> library = [device newLibraryWithSource:text options:options error:&error];
        check(library != nil, "metal: the kernel library does not compile on {}: {}",
              [device.name UTF8String], text_of(error));
        return std::make_unique<AppleDevice>(device, library);
    }
}

}  // namespace coli::metal
