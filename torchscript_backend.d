torchscript_backend.o: src/backends/torchscript_backend.cpp \
 /usr/include/stdc-predef.h /usr/include/torch/script.h \
 /usr/include/torch/csrc/api/include/torch/types.h \
 /usr/include/ATen/ATen.h /usr/include/ATen/Context.h \
 /usr/include/ATen/CPUGeneratorImpl.h /usr/include/ATen/core/Generator.h \
 /usr/lib/gcc/x86_64-linux-gnu/12/include/stdint.h /usr/include/stdint.h \
 /usr/include/x86_64-linux-gnu/bits/libc-header-start.h \
 /usr/include/features.h /usr/include/features-time64.h \
 /usr/include/x86_64-linux-gnu/bits/wordsize.h \
 /usr/include/x86_64-linux-gnu/bits/timesize.h \
 /usr/include/x86_64-linux-gnu/sys/cdefs.h \
 /usr/include/x86_64-linux-gnu/bits/long-double.h \
 /usr/include/x86_64-linux-gnu/gnu/stubs.h \
 /usr/include/x86_64-linux-gnu/gnu/stubs-64.h \
 /usr/include/x86_64-linux-gnu/bits/types.h \
 /usr/include/x86_64-linux-gnu/bits/typesizes.h \
 /usr/include/x86_64-linux-gnu/bits/time64.h \
 /usr/include/x86_64-linux-gnu/bits/wchar.h \
 /usr/include/x86_64-linux-gnu/bits/stdint-intn.h \
 /usr/include/x86_64-linux-gnu/bits/stdint-uintn.h \
 /usr/include/c++/12/mutex /usr/include/c++/12/tuple \
 /usr/include/c++/12/bits/stl_pair.h /usr/include/c++/12/type_traits \
 /usr/include/x86_64-linux-gnu/c++/12/bits/c++config.h \
 /usr/include/x86_64-linux-gnu/c++/12/bits/os_defines.h \
 /usr/include/x86_64-linux-gnu/c++/12/bits/cpu_defines.h \
 /usr/include/c++/12/pstl/pstl_config.h /usr/include/c++/12/bits/move.h \
 /usr/include/c++/12/bits/utility.h \
 /usr/include/c++/12/bits/uses_allocator.h \
 /usr/include/c++/12/bits/invoke.h /usr/include/c++/12/exception \
 /usr/include/c++/12/bits/exception.h \
 /usr/include/c++/12/bits/exception_ptr.h \
 /usr/include/c++/12/bits/exception_defines.h \
 /usr/include/c++/12/bits/cxxabi_init_exception.h \
 /usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h \
 /usr/include/c++/12/typeinfo /usr/include/c++/12/bits/hash_bytes.h \
 /usr/include/c++/12/new /usr/include/c++/12/bits/nested_exception.h \
 /usr/include/c++/12/system_error \
 /usr/include/x86_64-linux-gnu/c++/12/bits/error_constants.h \
 /usr/include/c++/12/cerrno /usr/include/errno.h \
 /usr/include/x86_64-linux-gnu/bits/errno.h /usr/include/linux/errno.h \
 /usr/include/x86_64-linux-gnu/asm/errno.h \
 /usr/include/asm-generic/errno.h /usr/include/asm-generic/errno-base.h \
 /usr/include/x86_64-linux-gnu/bits/types/error_t.h \
 /usr/include/c++/12/iosfwd /usr/include/c++/12/bits/stringfwd.h \
 /usr/include/c++/12/bits/memoryfwd.h /usr/include/c++/12/bits/postypes.h \
 /usr/include/c++/12/cwchar /usr/include/wchar.h \
 /usr/include/x86_64-linux-gnu/bits/floatn.h \
 /usr/include/x86_64-linux-gnu/bits/floatn-common.h \
 /usr/lib/gcc/x86_64-linux-gnu/12/include/stdarg.h \
 /usr/include/x86_64-linux-gnu/bits/types/wint_t.h \
 /usr/include/x86_64-linux-gnu/bits/types/mbstate_t.h \
 /usr/include/x86_64-linux-gnu/bits/types/__mbstate_t.h \
 /usr/include/x86_64-linux-gnu/bits/types/__FILE.h \
 /usr/include/x86_64-linux-gnu/bits/types/FILE.h \
 /usr/include/x86_64-linux-gnu/bits/types/locale_t.h \
 /usr/include/x86_64-linux-gnu/bits/types/__locale_t.h \
 /usr/include/c++/12/stdexcept /usr/include/c++/12/string \
 /usr/include/c++/12/bits/char_traits.h /usr/include/c++/12/cstdint \
 /usr/include/c++/12/bits/allocator.h \
 /usr/include/x86_64-linux-gnu/c++/12/bits/c++allocator.h \
 /usr/include/c++/12/bits/new_allocator.h \
 /usr/include/c++/12/bits/functexcept.h \
 /usr/include/c++/12/bits/cpp_type_traits.h \
 /usr/include/c++/12/bits/localefwd.h \
 /usr/include/x86_64-linux-gnu/c++/12/bits/c++locale.h \
 /usr/include/c++/12/clocale /usr/include/locale.h \
 /usr/include/x86_64-linux-gnu/bits/locale.h /usr/include/c++/12/cctype \
 /usr/include/ctype.h /usr/include/x86_64-linux-gnu/bits/endian.h \
 /usr/include/x86_64-linux-gnu/bits/endianness.h \
 /usr/include/c++/12/bits/ostream_insert.h \
 /usr/include/c++/12/bits/cxxabi_forced.h \
 /usr/include/c++/12/bits/stl_iterator_base_types.h \
 /usr/include/c++/12/bits/stl_iterator_base_funcs.h \
 /usr/include/c++/12/bits/concept_check.h \
 /usr/include/c++/12/debug/assertions.h \
 /usr/include/c++/12/bits/stl_iterator.h \
 /usr/include/c++/12/ext/type_traits.h \
 /usr/include/c++/12/bits/ptr_traits.h \
 /usr/include/c++/12/bits/stl_function.h \
 /usr/include/c++/12/backward/binders.h \
 /usr/include/c++/12/ext/numeric_traits.h \
 /usr/include/c++/12/bits/stl_algobase.h \
 /usr/include/c++/12/debug/debug.h \
 /usr/include/c++/12/bits/predefined_ops.h \
 /usr/include/c++/12/bits/refwrap.h \
 /usr/include/c++/12/bits/range_access.h \
 /usr/include/c++/12/initializer_list \
 /usr/include/c++/12/bits/basic_string.h \
 /usr/include/c++/12/ext/alloc_traits.h \
 /usr/include/c++/12/bits/alloc_traits.h \
 /usr/include/c++/12/bits/stl_construct.h /usr/include/c++/12/string_view \
 /usr/include/c++/12/bits/functional_hash.h \
 /usr/include/c++/12/bits/string_view.tcc \
 /usr/include/c++/12/ext/string_conversions.h /usr/include/c++/12/cstdlib \
 /usr/include/stdlib.h /usr/include/x86_64-linux-gnu/bits/waitflags.h \
 /usr/include/x86_64-linux-gnu/bits/waitstatus.h \
 /usr/include/x86_64-linux-gnu/sys/types.h \
 /usr/include/x86_64-linux-gnu/bits/types/clock_t.h \
 /usr/include/x86_64-linux-gnu/bits/types/clockid_t.h \
 /usr/include/x86_64-linux-gnu/bits/types/time_t.h \
 /usr/include/x86_64-linux-gnu/bits/types/timer_t.h /usr/include/endian.h \
 /usr/include/x86_64-linux-gnu/bits/byteswap.h \
 /usr/include/x86_64-linux-gnu/bits/uintn-identity.h \
 /usr/include/x86_64-linux-gnu/sys/select.h \
 /usr/include/x86_64-linux-gnu/bits/select.h \
 /usr/include/x86_64-linux-gnu/bits/types/sigset_t.h \
 /usr/include/x86_64-linux-gnu/bits/types/__sigset_t.h \
 /usr/include/x86_64-linux-gnu/bits/types/struct_timeval.h \
 /usr/include/x86_64-linux-gnu/bits/types/struct_timespec.h \
 /usr/include/x86_64-linux-gnu/bits/pthreadtypes.h \
 /usr/include/x86_64-linux-gnu/bits/thread-shared-types.h \
 /usr/include/x86_64-linux-gnu/bits/pthreadtypes-arch.h \
 /usr/include/x86_64-linux-gnu/bits/atomic_wide_counter.h \
 /usr/include/x86_64-linux-gnu/bits/struct_mutex.h \
 /usr/include/x86_64-linux-gnu/bits/struct_rwlock.h /usr/include/alloca.h \
 /usr/include/x86_64-linux-gnu/bits/stdlib-bsearch.h \
 /usr/include/x86_64-linux-gnu/bits/stdlib-float.h \
 /usr/include/c++/12/bits/std_abs.h /usr/include/c++/12/cstdio \
 /usr/include/stdio.h /usr/include/x86_64-linux-gnu/bits/types/__fpos_t.h \
 /usr/include/x86_64-linux-gnu/bits/types/__fpos64_t.h \
 /usr/include/x86_64-linux-gnu/bits/types/struct_FILE.h \
 /usr/include/x86_64-linux-gnu/bits/types/cookie_io_functions_t.h \
 /usr/include/x86_64-linux-gnu/bits/stdio_lim.h \
 /usr/include/x86_64-linux-gnu/bits/stdio.h \
 /usr/include/c++/12/bits/charconv.h \
 /usr/include/c++/12/bits/basic_string.tcc \
 /usr/include/c++/12/bits/chrono.h /usr/include/c++/12/ratio \
 /usr/include/c++/12/limits /usr/include/c++/12/ctime /usr/include/time.h \
 /usr/include/x86_64-linux-gnu/bits/time.h \
 /usr/include/x86_64-linux-gnu/bits/timex.h \
 /usr/include/x86_64-linux-gnu/bits/types/struct_tm.h \
 /usr/include/x86_64-linux-gnu/bits/types/struct_itimerspec.h \
 /usr/include/c++/12/bits/parse_numbers.h \
 /usr/include/c++/12/bits/std_mutex.h \
 /usr/include/x86_64-linux-gnu/c++/12/bits/gthr.h \
 /usr/include/x86_64-linux-gnu/c++/12/bits/gthr-default.h \
 /usr/include/pthread.h /usr/include/sched.h \
 /usr/include/x86_64-linux-gnu/bits/sched.h \
 /usr/include/x86_64-linux-gnu/bits/types/struct_sched_param.h \
 /usr/include/x86_64-linux-gnu/bits/cpu-set.h \
 /usr/include/x86_64-linux-gnu/bits/setjmp.h \
 /usr/include/x86_64-linux-gnu/bits/types/struct___jmp_buf_tag.h \
 /usr/include/x86_64-linux-gnu/bits/pthread_stack_min-dynamic.h \
 /usr/include/c++/12/bits/unique_lock.h \
 /usr/include/c++/12/ext/atomicity.h \
 /usr/include/x86_64-linux-gnu/c++/12/bits/atomic_word.h \
 /usr/include/x86_64-linux-gnu/sys/single_threaded.h \
 /usr/include/c++/12/deque /usr/include/c++/12/bits/stl_uninitialized.h \
 /usr/include/c++/12/bits/stl_deque.h /usr/include/c++/12/bits/deque.tcc \
 /usr/include/c++/12/atomic /usr/include/c++/12/bits/atomic_base.h \
 /usr/include/c++/12/bits/atomic_lockfree_defines.h \
 /usr/include/c++/12/utility /usr/include/c++/12/bits/stl_relops.h \
 /usr/include/c++/12/cstddef /usr/include/c10/util/Exception.h \
 /usr/include/c10/macros/Macros.h /usr/include/c++/12/cassert \
 /usr/include/assert.h /usr/include/c10/macros/cmake_macros.h \
 /usr/include/c10/macros/Export.h /usr/include/c10/util/Deprecated.h \
 /usr/include/c10/util/StringUtil.h /usr/include/c10/util/string_utils.h \
 /usr/include/c++/12/sstream /usr/include/c++/12/istream \
 /usr/include/c++/12/ios /usr/include/c++/12/bits/ios_base.h \
 /usr/include/c++/12/bits/locale_classes.h \
 /usr/include/c++/12/bits/locale_classes.tcc \
 /usr/include/c++/12/streambuf /usr/include/c++/12/bits/streambuf.tcc \
 /usr/include/c++/12/bits/basic_ios.h \
 /usr/include/c++/12/bits/locale_facets.h /usr/include/c++/12/cwctype \
 /usr/include/wctype.h /usr/include/x86_64-linux-gnu/bits/wctype-wchar.h \
 /usr/include/x86_64-linux-gnu/c++/12/bits/ctype_base.h \
 /usr/include/c++/12/bits/streambuf_iterator.h \
 /usr/include/x86_64-linux-gnu/c++/12/bits/ctype_inline.h \
 /usr/include/c++/12/bits/locale_facets.tcc \
 /usr/include/c++/12/bits/basic_ios.tcc /usr/include/c++/12/ostream \
 /usr/include/c++/12/bits/ostream.tcc \
 /usr/include/c++/12/bits/istream.tcc \
 /usr/include/c++/12/bits/sstream.tcc /usr/include/c10/util/string_view.h \
 /usr/include/c10/util/C++17.h /usr/include/c++/12/functional \
 /usr/include/c++/12/bits/std_function.h \
 /usr/include/c++/12/unordered_map \
 /usr/include/c++/12/ext/aligned_buffer.h \
 /usr/include/c++/12/bits/hashtable.h \
 /usr/include/c++/12/bits/hashtable_policy.h \
 /usr/include/c++/12/bits/enable_special_members.h \
 /usr/include/c++/12/bits/node_handle.h \
 /usr/include/c++/12/bits/unordered_map.h \
 /usr/include/c++/12/bits/erase_if.h /usr/include/c++/12/vector \
 /usr/include/c++/12/bits/stl_vector.h \
 /usr/include/c++/12/bits/stl_bvector.h \
 /usr/include/c++/12/bits/vector.tcc /usr/include/c++/12/array \
 /usr/include/c++/12/compare /usr/include/c++/12/bits/stl_algo.h \
 /usr/include/c++/12/bits/algorithmfwd.h \
 /usr/include/c++/12/bits/stl_heap.h \
 /usr/include/c++/12/bits/stl_tempbuf.h \
 /usr/include/c++/12/bits/uniform_int_dist.h /usr/include/c++/12/memory \
 /usr/include/c++/12/bits/stl_raw_storage_iter.h \
 /usr/include/c++/12/bits/align.h /usr/include/c++/12/bit \
 /usr/include/c++/12/bits/unique_ptr.h \
 /usr/include/c++/12/bits/shared_ptr.h \
 /usr/include/c++/12/bits/shared_ptr_base.h \
 /usr/include/c++/12/bits/allocated_ptr.h \
 /usr/include/c++/12/ext/concurrence.h \
 /usr/include/c++/12/bits/shared_ptr_atomic.h \
 /usr/include/c++/12/backward/auto_ptr.h \
 /usr/include/c++/12/pstl/glue_memory_defs.h \
 /usr/include/c++/12/pstl/execution_defs.h \
 /usr/include/c10/util/reverse_iterator.h /usr/include/c++/12/iterator \
 /usr/include/c++/12/bits/stream_iterator.h /usr/include/c++/12/algorithm \
 /usr/include/c++/12/pstl/glue_algorithm_defs.h \
 /usr/include/c++/12/cstring /usr/include/string.h /usr/include/strings.h \
 /usr/include/c10/util/intrusive_ptr.h \
 /usr/include/c10/util/ExclusivelyOwned.h \
 /usr/include/c10/util/in_place.h /usr/include/c10/util/MaybeOwned.h \
 /usr/include/c++/12/climits \
 /usr/lib/gcc/x86_64-linux-gnu/12/include/limits.h \
 /usr/lib/gcc/x86_64-linux-gnu/12/include/syslimits.h \
 /usr/include/limits.h /usr/include/x86_64-linux-gnu/bits/posix1_lim.h \
 /usr/include/x86_64-linux-gnu/bits/local_lim.h \
 /usr/include/linux/limits.h \
 /usr/include/x86_64-linux-gnu/bits/posix2_lim.h \
 /usr/include/x86_64-linux-gnu/bits/xopen_lim.h \
 /usr/include/x86_64-linux-gnu/bits/uio_lim.h \
 /usr/include/c10/core/Device.h /usr/include/c10/core/DeviceType.h \
 /usr/include/c10/core/DispatchKeySet.h \
 /usr/include/c10/core/DispatchKey.h /usr/include/c10/util/ArrayRef.h \
 /usr/include/c10/util/SmallVector.h /usr/include/c10/util/AlignOf.h \
 /usr/include/c10/util/Metaprogramming.h /usr/include/c10/util/Array.h \
 /usr/include/c10/util/TypeList.h /usr/include/c10/util/TypeTraits.h \
 /usr/include/c10/util/llvmMathExtras.h /usr/include/c++/12/cmath \
 /usr/include/math.h /usr/include/x86_64-linux-gnu/bits/math-vector.h \
 /usr/include/x86_64-linux-gnu/bits/libm-simd-decl-stubs.h \
 /usr/include/x86_64-linux-gnu/bits/flt-eval-method.h \
 /usr/include/x86_64-linux-gnu/bits/fp-logb.h \
 /usr/include/x86_64-linux-gnu/bits/fp-fast.h \
 /usr/include/x86_64-linux-gnu/bits/mathcalls-helper-functions.h \
 /usr/include/x86_64-linux-gnu/bits/mathcalls.h \
 /usr/include/x86_64-linux-gnu/bits/mathcalls-narrow.h \
 /usr/include/x86_64-linux-gnu/bits/iscanonical.h \
 /usr/include/c++/12/bits/specfun.h /usr/include/c++/12/tr1/gamma.tcc \
 /usr/include/c++/12/tr1/special_function_util.h \
 /usr/include/c++/12/tr1/bessel_function.tcc \
 /usr/include/c++/12/tr1/beta_function.tcc \
 /usr/include/c++/12/tr1/ell_integral.tcc \
 /usr/include/c++/12/tr1/exp_integral.tcc \
 /usr/include/c++/12/tr1/hypergeometric.tcc \
 /usr/include/c++/12/tr1/legendre_function.tcc \
 /usr/include/c++/12/tr1/modified_bessel_func.tcc \
 /usr/include/c++/12/tr1/poly_hermite.tcc \
 /usr/include/c++/12/tr1/poly_laguerre.tcc \
 /usr/include/c++/12/tr1/riemann_zeta.tcc \
 /usr/include/c10/core/GeneratorImpl.h /usr/include/c10/core/TensorImpl.h \
 /usr/include/c10/core/Backend.h /usr/include/c10/core/CopyBytes.h \
 /usr/include/c10/core/InferenceMode.h \
 /usr/include/c10/core/AutogradState.h /usr/include/c10/core/GradMode.h \
 /usr/include/c10/core/impl/LocalDispatchKeySet.h \
 /usr/include/c10/util/Flags.h /usr/include/c10/util/Registry.h \
 /usr/include/c10/util/Type.h /usr/include/gflags/gflags.h \
 /usr/include/gflags/gflags_declare.h /usr/include/gflags/gflags_gflags.h \
 /usr/include/c10/core/MemoryFormat.h /usr/include/c10/core/Storage.h \
 /usr/include/c10/core/StorageImpl.h /usr/include/c10/core/Allocator.h \
 /usr/include/c10/util/ThreadLocalDebugInfo.h \
 /usr/include/c10/util/UniqueVoidPtr.h /usr/include/c10/core/ScalarType.h \
 /usr/include/c10/util/BFloat16.h /usr/include/c10/util/BFloat16-inl.h \
 /usr/include/c10/util/Half.h /usr/include/c10/util/TypeSafeSignMath.h \
 /usr/include/c10/util/complex.h /usr/include/c++/12/complex \
 /usr/include/c10/util/complex_math.h \
 /usr/include/c10/util/complex_utils.h /usr/include/c10/util/Half-inl.h \
 /usr/include/c10/util/qint32.h /usr/include/c10/util/qint8.h \
 /usr/include/c10/util/quint2x4.h /usr/include/c10/util/quint4x2.h \
 /usr/include/c10/util/quint8.h /usr/include/c10/core/SymInt.h \
 /usr/include/c10/core/SymIntNodeImpl.h \
 /usr/include/c10/core/SymFloatNodeImpl.h /usr/include/c++/12/numeric \
 /usr/include/c++/12/bits/stl_numeric.h \
 /usr/include/c++/12/pstl/glue_numeric_defs.h \
 /usr/include/c10/core/SymIntArrayRef.h /usr/include/c10/util/Optional.h \
 /usr/include/c10/core/TensorOptions.h \
 /usr/include/c10/core/DefaultDtype.h /usr/include/c10/core/Layout.h \
 /usr/include/c10/core/ScalarTypeToTypeMeta.h \
 /usr/include/c10/util/typeid.h /usr/include/c++/12/unordered_set \
 /usr/include/c++/12/bits/unordered_set.h \
 /usr/include/c10/util/Backtrace.h /usr/include/c10/util/IdWrapper.h \
 /usr/include/c10/util/TypeIndex.h /usr/include/c10/util/ConstexprCrc.h \
 /usr/include/c++/12/cinttypes /usr/include/inttypes.h \
 /usr/include/c10/util/flat_hash_map.h /usr/include/c10/util/irange.h \
 /usr/include/c10/core/WrapDimMinimal.h \
 /usr/include/c10/core/impl/PyInterpreter.h \
 /usr/include/c10/util/python_stub.h \
 /usr/include/c10/core/impl/SizesAndStrides.h \
 /usr/include/c10/util/DimVector.h /usr/include/c10/util/Logging.h \
 /usr/include/c10/util/logging_is_google_glog.h /usr/include/c++/12/map \
 /usr/include/c++/12/bits/stl_tree.h /usr/include/c++/12/bits/stl_map.h \
 /usr/include/c++/12/bits/stl_multimap.h /usr/include/c++/12/set \
 /usr/include/c++/12/bits/stl_set.h \
 /usr/include/c++/12/bits/stl_multiset.h /usr/include/c++/12/iomanip \
 /usr/include/c++/12/locale \
 /usr/include/c++/12/bits/locale_facets_nonio.h \
 /usr/include/x86_64-linux-gnu/c++/12/bits/time_members.h \
 /usr/include/x86_64-linux-gnu/c++/12/bits/messages_members.h \
 /usr/include/libintl.h /usr/include/c++/12/bits/codecvt.h \
 /usr/include/c++/12/bits/locale_facets_nonio.tcc \
 /usr/include/c++/12/bits/locale_conv.h \
 /usr/include/c++/12/bits/quoted_string.h /usr/include/glog/stl_logging.h \
 /usr/include/c++/12/list /usr/include/c++/12/bits/stl_list.h \
 /usr/include/c++/12/bits/list.tcc /usr/include/glog/logging.h \
 /usr/include/c++/12/chrono /usr/include/unistd.h \
 /usr/include/x86_64-linux-gnu/bits/posix_opt.h \
 /usr/include/x86_64-linux-gnu/bits/environments.h \
 /usr/include/x86_64-linux-gnu/bits/confname.h \
 /usr/include/x86_64-linux-gnu/bits/getopt_posix.h \
 /usr/include/x86_64-linux-gnu/bits/getopt_core.h \
 /usr/include/x86_64-linux-gnu/bits/unistd_ext.h \
 /usr/include/linux/close_range.h /usr/include/glog/platform.h \
 /usr/include/glog/export.h /usr/include/glog/log_severity.h \
 /usr/include/glog/vlog_is_on.h /usr/include/c10/util/accumulate.h \
 /usr/include/c10/util/safe_numerics.h \
 /usr/include/c10/util/strong_type.h \
 /usr/include/ATen/core/MT19937RNGEngine.h \
 /usr/include/ATen/LinalgBackend.h /usr/include/ATen/core/ATenGeneral.h \
 /usr/include/ATen/core/DeprecatedTypeProperties.h \
 /usr/include/ATen/core/DeprecatedTypePropertiesRegistry.h \
 /usr/include/ATen/core/LegacyTypeDispatch.h \
 /usr/include/ATen/detail/CUDAHooksInterface.h \
 /usr/include/ATen/detail/HIPHooksInterface.h \
 /usr/include/ATen/detail/ORTHooksInterface.h \
 /usr/include/c10/core/QEngine.h \
 /usr/include/c10/core/impl/DeviceGuardImplInterface.h \
 /usr/include/c10/core/Stream.h /usr/include/c10/util/CallOnce.h \
 /usr/include/c++/12/thread /usr/include/c++/12/bits/std_thread.h \
 /usr/include/c++/12/bits/this_thread_sleep.h /usr/include/ATen/Device.h \
 /usr/include/ATen/DeviceGuard.h /usr/include/ATen/core/IListRef.h \
 /usr/include/ATen/core/ivalue_to.h /usr/include/ATen/core/IListRef_inl.h \
 /usr/include/ATen/core/List.h /usr/include/ATen/core/jit_type_base.h \
 /usr/include/ATen/core/qualified_name.h \
 /usr/include/ATen/core/type_ptr.h /usr/include/c10/core/SymFloat.h \
 /usr/include/ATen/core/List_inl.h /usr/include/ATen/core/ivalue.h \
 /usr/include/ATen/core/DimVector.h /usr/include/ATen/core/TensorBody.h \
 /usr/include/c10/core/QScheme.h /usr/include/c10/core/Scalar.h \
 /usr/include/c10/core/OptionalRef.h /usr/include/c10/util/TypeCast.h \
 /usr/include/c10/core/UndefinedTensorImpl.h \
 /usr/include/c10/util/OptionalArrayRef.h \
 /usr/include/ATen/core/CheckMemoryFormat.h \
 /usr/include/ATen/core/NamedTensor.h /usr/include/ATen/core/Dimname.h \
 /usr/include/ATen/core/symbol.h /usr/include/ATen/core/QuantizerBase.h \
 /usr/include/ATen/core/TensorAccessor.h \
 /usr/include/ATen/core/TensorBase.h \
 /usr/include/c10/util/ExclusivelyOwnedTensorTraits.h \
 /usr/include/ATen/MethodOperators.h /usr/include/ATen/core/ATen_fwd.h \
 /usr/include/ATen/ops/_addmm_activation_ops.h \
 /usr/include/ATen/ops/_autocast_to_full_precision_ops.h \
 /usr/include/ATen/ops/_autocast_to_reduced_precision_ops.h \
 /usr/include/ATen/ops/_backward_ops.h \
 /usr/include/ATen/ops/_coalesced_ops.h /usr/include/ATen/ops/_conj_ops.h \
 /usr/include/ATen/ops/_conj_physical_ops.h \
 /usr/include/ATen/ops/_dimI_ops.h /usr/include/ATen/ops/_dimV_ops.h \
 /usr/include/ATen/ops/_fw_primal_ops.h \
 /usr/include/ATen/ops/_indices_ops.h \
 /usr/include/ATen/ops/_is_zerotensor_ops.h \
 /usr/include/ATen/ops/_neg_view_ops.h \
 /usr/include/ATen/ops/_nested_tensor_layer_norm_ops.h \
 /usr/include/ATen/ops/_nested_tensor_offsets_ops.h \
 /usr/include/ATen/ops/_nested_tensor_size_ops.h \
 /usr/include/ATen/ops/_nested_tensor_strides_ops.h \
 /usr/include/ATen/ops/_nnz_ops.h \
 /usr/include/ATen/ops/_reshape_alias_ops.h \
 /usr/include/ATen/ops/_to_dense_ops.h \
 /usr/include/ATen/ops/_values_ops.h /usr/include/ATen/ops/_version_ops.h \
 /usr/include/ATen/ops/abs_ops.h /usr/include/ATen/ops/absolute_ops.h \
 /usr/include/ATen/ops/acos_ops.h /usr/include/ATen/ops/acosh_ops.h \
 /usr/include/ATen/ops/add_ops.h /usr/include/ATen/ops/addbmm_ops.h \
 /usr/include/ATen/ops/addcdiv_ops.h /usr/include/ATen/ops/addcmul_ops.h \
 /usr/include/ATen/ops/addmm_ops.h /usr/include/ATen/ops/addmv_ops.h \
 /usr/include/ATen/ops/addr_ops.h /usr/include/ATen/ops/adjoint_ops.h \
 /usr/include/ATen/ops/alias_ops.h /usr/include/ATen/ops/align_as_ops.h \
 /usr/include/ATen/ops/align_to_ops.h /usr/include/ATen/ops/all_ops.h \
 /usr/include/ATen/ops/allclose_ops.h /usr/include/ATen/ops/amax_ops.h \
 /usr/include/ATen/ops/amin_ops.h /usr/include/ATen/ops/aminmax_ops.h \
 /usr/include/ATen/ops/and_ops.h /usr/include/ATen/ops/angle_ops.h \
 /usr/include/ATen/ops/any_ops.h /usr/include/ATen/ops/arccos_ops.h \
 /usr/include/ATen/ops/arccosh_ops.h /usr/include/ATen/ops/arcsin_ops.h \
 /usr/include/ATen/ops/arcsinh_ops.h /usr/include/ATen/ops/arctan2_ops.h \
 /usr/include/ATen/ops/arctan_ops.h /usr/include/ATen/ops/arctanh_ops.h \
 /usr/include/ATen/ops/argmax_ops.h /usr/include/ATen/ops/argmin_ops.h \
 /usr/include/ATen/ops/argsort_ops.h /usr/include/ATen/ops/argwhere_ops.h \
 /usr/include/ATen/ops/as_strided_ops.h \
 /usr/include/ATen/ops/as_strided_scatter_ops.h \
 /usr/include/ATen/ops/asin_ops.h /usr/include/ATen/ops/asinh_ops.h \
 /usr/include/ATen/ops/atan2_ops.h /usr/include/ATen/ops/atan_ops.h \
 /usr/include/ATen/ops/atanh_ops.h /usr/include/ATen/ops/baddbmm_ops.h \
 /usr/include/ATen/ops/bernoulli_ops.h \
 /usr/include/ATen/ops/bincount_ops.h \
 /usr/include/ATen/ops/bitwise_and_ops.h \
 /usr/include/ATen/ops/bitwise_left_shift_ops.h \
 /usr/include/ATen/ops/bitwise_not_ops.h \
 /usr/include/ATen/ops/bitwise_or_ops.h \
 /usr/include/ATen/ops/bitwise_right_shift_ops.h \
 /usr/include/ATen/ops/bitwise_xor_ops.h /usr/include/ATen/ops/bmm_ops.h \
 /usr/include/ATen/ops/broadcast_to_ops.h \
 /usr/include/ATen/ops/cauchy_ops.h \
 /usr/include/ATen/ops/ccol_indices_ops.h \
 /usr/include/ATen/ops/ceil_ops.h /usr/include/ATen/ops/chalf_ops.h \
 /usr/include/ATen/ops/cholesky_inverse_ops.h \
 /usr/include/ATen/ops/cholesky_ops.h \
 /usr/include/ATen/ops/cholesky_solve_ops.h \
 /usr/include/ATen/ops/chunk_ops.h /usr/include/ATen/ops/clamp_max_ops.h \
 /usr/include/ATen/ops/clamp_min_ops.h /usr/include/ATen/ops/clamp_ops.h \
 /usr/include/ATen/ops/clip_ops.h /usr/include/ATen/ops/clone_ops.h \
 /usr/include/ATen/ops/coalesce_ops.h \
 /usr/include/ATen/ops/col_indices_ops.h /usr/include/ATen/ops/conj_ops.h \
 /usr/include/ATen/ops/conj_physical_ops.h \
 /usr/include/ATen/ops/contiguous_ops.h /usr/include/ATen/ops/copy_ops.h \
 /usr/include/ATen/ops/copysign_ops.h \
 /usr/include/ATen/ops/corrcoef_ops.h /usr/include/ATen/ops/cos_ops.h \
 /usr/include/ATen/ops/cosh_ops.h \
 /usr/include/ATen/ops/count_nonzero_ops.h \
 /usr/include/ATen/ops/cov_ops.h /usr/include/ATen/ops/cross_ops.h \
 /usr/include/ATen/ops/crow_indices_ops.h \
 /usr/include/ATen/ops/cummax_ops.h /usr/include/ATen/ops/cummin_ops.h \
 /usr/include/ATen/ops/cumprod_ops.h /usr/include/ATen/ops/cumsum_ops.h \
 /usr/include/ATen/ops/data_ops.h /usr/include/ATen/ops/deg2rad_ops.h \
 /usr/include/ATen/ops/dense_dim_ops.h \
 /usr/include/ATen/ops/dequantize_ops.h /usr/include/ATen/ops/det_ops.h \
 /usr/include/ATen/ops/detach_ops.h \
 /usr/include/ATen/ops/diag_embed_ops.h /usr/include/ATen/ops/diag_ops.h \
 /usr/include/ATen/ops/diagflat_ops.h \
 /usr/include/ATen/ops/diagonal_ops.h \
 /usr/include/ATen/ops/diagonal_scatter_ops.h \
 /usr/include/ATen/ops/diff_ops.h /usr/include/ATen/ops/digamma_ops.h \
 /usr/include/ATen/ops/dist_ops.h /usr/include/ATen/ops/div_ops.h \
 /usr/include/ATen/ops/divide_ops.h /usr/include/ATen/ops/dot_ops.h \
 /usr/include/ATen/ops/dsplit_ops.h /usr/include/ATen/ops/eq_ops.h \
 /usr/include/ATen/ops/equal_ops.h /usr/include/ATen/ops/erf_ops.h \
 /usr/include/ATen/ops/erfc_ops.h /usr/include/ATen/ops/erfinv_ops.h \
 /usr/include/ATen/ops/exp2_ops.h /usr/include/ATen/ops/exp_ops.h \
 /usr/include/ATen/ops/expand_as_ops.h /usr/include/ATen/ops/expand_ops.h \
 /usr/include/ATen/ops/expm1_ops.h \
 /usr/include/ATen/ops/exponential_ops.h \
 /usr/include/ATen/ops/fill_diagonal_ops.h \
 /usr/include/ATen/ops/fill_ops.h /usr/include/ATen/ops/fix_ops.h \
 /usr/include/ATen/ops/flatten_ops.h /usr/include/ATen/ops/flip_ops.h \
 /usr/include/ATen/ops/fliplr_ops.h /usr/include/ATen/ops/flipud_ops.h \
 /usr/include/ATen/ops/float_power_ops.h \
 /usr/include/ATen/ops/floor_divide_ops.h \
 /usr/include/ATen/ops/floor_ops.h /usr/include/ATen/ops/fmax_ops.h \
 /usr/include/ATen/ops/fmin_ops.h /usr/include/ATen/ops/fmod_ops.h \
 /usr/include/ATen/ops/frac_ops.h /usr/include/ATen/ops/frexp_ops.h \
 /usr/include/ATen/ops/gather_ops.h /usr/include/ATen/ops/gcd_ops.h \
 /usr/include/ATen/ops/ge_ops.h /usr/include/ATen/ops/geometric_ops.h \
 /usr/include/ATen/ops/geqrf_ops.h /usr/include/ATen/ops/ger_ops.h \
 /usr/include/ATen/ops/greater_equal_ops.h \
 /usr/include/ATen/ops/greater_ops.h /usr/include/ATen/ops/gt_ops.h \
 /usr/include/ATen/ops/hardshrink_backward_ops.h \
 /usr/include/ATen/ops/hardshrink_ops.h \
 /usr/include/ATen/ops/heaviside_ops.h /usr/include/ATen/ops/histc_ops.h \
 /usr/include/ATen/ops/histogram_ops.h /usr/include/ATen/ops/hsplit_ops.h \
 /usr/include/ATen/ops/hypot_ops.h /usr/include/ATen/ops/i0_ops.h \
 /usr/include/ATen/ops/igamma_ops.h /usr/include/ATen/ops/igammac_ops.h \
 /usr/include/ATen/ops/index_add_ops.h \
 /usr/include/ATen/ops/index_copy_ops.h \
 /usr/include/ATen/ops/index_fill_ops.h /usr/include/ATen/ops/index_ops.h \
 /usr/include/ATen/ops/index_put_ops.h \
 /usr/include/ATen/ops/index_reduce_ops.h \
 /usr/include/ATen/ops/index_select_ops.h \
 /usr/include/ATen/ops/indices_ops.h /usr/include/ATen/ops/inner_ops.h \
 /usr/include/ATen/ops/int_repr_ops.h /usr/include/ATen/ops/inverse_ops.h \
 /usr/include/ATen/ops/is_coalesced_ops.h \
 /usr/include/ATen/ops/is_complex_ops.h \
 /usr/include/ATen/ops/is_conj_ops.h \
 /usr/include/ATen/ops/is_distributed_ops.h \
 /usr/include/ATen/ops/is_floating_point_ops.h \
 /usr/include/ATen/ops/is_inference_ops.h \
 /usr/include/ATen/ops/is_leaf_ops.h /usr/include/ATen/ops/is_neg_ops.h \
 /usr/include/ATen/ops/is_nonzero_ops.h \
 /usr/include/ATen/ops/is_pinned_ops.h \
 /usr/include/ATen/ops/is_same_size_ops.h \
 /usr/include/ATen/ops/is_set_to_ops.h \
 /usr/include/ATen/ops/is_signed_ops.h \
 /usr/include/ATen/ops/isclose_ops.h /usr/include/ATen/ops/isfinite_ops.h \
 /usr/include/ATen/ops/isinf_ops.h /usr/include/ATen/ops/isnan_ops.h \
 /usr/include/ATen/ops/isneginf_ops.h \
 /usr/include/ATen/ops/isposinf_ops.h /usr/include/ATen/ops/isreal_ops.h \
 /usr/include/ATen/ops/istft_ops.h /usr/include/ATen/ops/item_ops.h \
 /usr/include/ATen/ops/kron_ops.h /usr/include/ATen/ops/kthvalue_ops.h \
 /usr/include/ATen/ops/lcm_ops.h /usr/include/ATen/ops/ldexp_ops.h \
 /usr/include/ATen/ops/le_ops.h /usr/include/ATen/ops/lerp_ops.h \
 /usr/include/ATen/ops/less_equal_ops.h /usr/include/ATen/ops/less_ops.h \
 /usr/include/ATen/ops/lgamma_ops.h /usr/include/ATen/ops/log10_ops.h \
 /usr/include/ATen/ops/log1p_ops.h /usr/include/ATen/ops/log2_ops.h \
 /usr/include/ATen/ops/log_normal_ops.h /usr/include/ATen/ops/log_ops.h \
 /usr/include/ATen/ops/log_softmax_ops.h \
 /usr/include/ATen/ops/logaddexp2_ops.h \
 /usr/include/ATen/ops/logaddexp_ops.h \
 /usr/include/ATen/ops/logcumsumexp_ops.h \
 /usr/include/ATen/ops/logdet_ops.h \
 /usr/include/ATen/ops/logical_and_ops.h \
 /usr/include/ATen/ops/logical_not_ops.h \
 /usr/include/ATen/ops/logical_or_ops.h \
 /usr/include/ATen/ops/logical_xor_ops.h \
 /usr/include/ATen/ops/logit_ops.h /usr/include/ATen/ops/logsumexp_ops.h \
 /usr/include/ATen/ops/lshift_ops.h /usr/include/ATen/ops/lt_ops.h \
 /usr/include/ATen/ops/lu_solve_ops.h /usr/include/ATen/ops/mH_ops.h \
 /usr/include/ATen/ops/mT_ops.h /usr/include/ATen/ops/masked_fill_ops.h \
 /usr/include/ATen/ops/masked_scatter_ops.h \
 /usr/include/ATen/ops/masked_select_ops.h \
 /usr/include/ATen/ops/matmul_ops.h /usr/include/ATen/ops/matrix_H_ops.h \
 /usr/include/ATen/ops/matrix_exp_ops.h \
 /usr/include/ATen/ops/matrix_power_ops.h /usr/include/ATen/ops/max_ops.h \
 /usr/include/ATen/ops/maximum_ops.h /usr/include/ATen/ops/mean_ops.h \
 /usr/include/ATen/ops/median_ops.h /usr/include/ATen/ops/min_ops.h \
 /usr/include/ATen/ops/minimum_ops.h /usr/include/ATen/ops/mm_ops.h \
 /usr/include/ATen/ops/mode_ops.h /usr/include/ATen/ops/moveaxis_ops.h \
 /usr/include/ATen/ops/movedim_ops.h /usr/include/ATen/ops/msort_ops.h \
 /usr/include/ATen/ops/mul_ops.h /usr/include/ATen/ops/multinomial_ops.h \
 /usr/include/ATen/ops/multiply_ops.h /usr/include/ATen/ops/mv_ops.h \
 /usr/include/ATen/ops/mvlgamma_ops.h \
 /usr/include/ATen/ops/nan_to_num_ops.h \
 /usr/include/ATen/ops/nanmean_ops.h \
 /usr/include/ATen/ops/nanmedian_ops.h \
 /usr/include/ATen/ops/nanquantile_ops.h \
 /usr/include/ATen/ops/nansum_ops.h \
 /usr/include/ATen/ops/narrow_copy_ops.h \
 /usr/include/ATen/ops/narrow_ops.h /usr/include/ATen/ops/ne_ops.h \
 /usr/include/ATen/ops/neg_ops.h /usr/include/ATen/ops/negative_ops.h \
 /usr/include/ATen/ops/new_empty_ops.h \
 /usr/include/ATen/ops/new_empty_strided_ops.h \
 /usr/include/ATen/ops/new_full_ops.h \
 /usr/include/ATen/ops/new_ones_ops.h \
 /usr/include/ATen/ops/new_zeros_ops.h \
 /usr/include/ATen/ops/nextafter_ops.h \
 /usr/include/ATen/ops/nonzero_numpy_ops.h \
 /usr/include/ATen/ops/nonzero_ops.h /usr/include/ATen/ops/norm_ops.h \
 /usr/include/ATen/ops/normal_ops.h /usr/include/ATen/ops/not_equal_ops.h \
 /usr/include/ATen/ops/numpy_T_ops.h /usr/include/ATen/ops/or_ops.h \
 /usr/include/ATen/ops/orgqr_ops.h /usr/include/ATen/ops/ormqr_ops.h \
 /usr/include/ATen/ops/outer_ops.h /usr/include/ATen/ops/output_nr_ops.h \
 /usr/include/ATen/ops/permute_ops.h \
 /usr/include/ATen/ops/pin_memory_ops.h \
 /usr/include/ATen/ops/pinverse_ops.h \
 /usr/include/ATen/ops/polygamma_ops.h \
 /usr/include/ATen/ops/positive_ops.h /usr/include/ATen/ops/pow_ops.h \
 /usr/include/ATen/ops/prelu_backward_ops.h \
 /usr/include/ATen/ops/prelu_ops.h /usr/include/ATen/ops/prod_ops.h \
 /usr/include/ATen/ops/put_ops.h \
 /usr/include/ATen/ops/q_per_channel_axis_ops.h \
 /usr/include/ATen/ops/q_per_channel_scales_ops.h \
 /usr/include/ATen/ops/q_per_channel_zero_points_ops.h \
 /usr/include/ATen/ops/q_scale_ops.h \
 /usr/include/ATen/ops/q_zero_point_ops.h /usr/include/ATen/ops/qr_ops.h \
 /usr/include/ATen/ops/qscheme_ops.h /usr/include/ATen/ops/quantile_ops.h \
 /usr/include/ATen/ops/rad2deg_ops.h /usr/include/ATen/ops/random_ops.h \
 /usr/include/ATen/ops/ravel_ops.h /usr/include/ATen/ops/reciprocal_ops.h \
 /usr/include/ATen/ops/record_stream_ops.h \
 /usr/include/ATen/ops/refine_names_ops.h \
 /usr/include/ATen/ops/relu_ops.h /usr/include/ATen/ops/remainder_ops.h \
 /usr/include/ATen/ops/rename_ops.h /usr/include/ATen/ops/renorm_ops.h \
 /usr/include/ATen/ops/repeat_interleave_ops.h \
 /usr/include/ATen/ops/repeat_ops.h \
 /usr/include/ATen/ops/requires_grad_ops.h \
 /usr/include/ATen/ops/reshape_as_ops.h \
 /usr/include/ATen/ops/reshape_ops.h \
 /usr/include/ATen/ops/resize_as_ops.h \
 /usr/include/ATen/ops/resize_as_sparse_ops.h \
 /usr/include/ATen/ops/resize_ops.h \
 /usr/include/ATen/ops/resolve_conj_ops.h \
 /usr/include/ATen/ops/resolve_neg_ops.h \
 /usr/include/ATen/ops/retain_grad_ops.h \
 /usr/include/ATen/ops/retains_grad_ops.h \
 /usr/include/ATen/ops/roll_ops.h /usr/include/ATen/ops/rot90_ops.h \
 /usr/include/ATen/ops/round_ops.h \
 /usr/include/ATen/ops/row_indices_ops.h \
 /usr/include/ATen/ops/rshift_ops.h /usr/include/ATen/ops/rsqrt_ops.h \
 /usr/include/ATen/ops/scatter_add_ops.h \
 /usr/include/ATen/ops/scatter_ops.h \
 /usr/include/ATen/ops/scatter_reduce_ops.h \
 /usr/include/ATen/ops/select_ops.h \
 /usr/include/ATen/ops/select_scatter_ops.h \
 /usr/include/ATen/ops/set_data_ops.h /usr/include/ATen/ops/set_ops.h \
 /usr/include/ATen/ops/sgn_ops.h /usr/include/ATen/ops/sigmoid_ops.h \
 /usr/include/ATen/ops/sign_ops.h /usr/include/ATen/ops/signbit_ops.h \
 /usr/include/ATen/ops/sin_ops.h /usr/include/ATen/ops/sinc_ops.h \
 /usr/include/ATen/ops/sinh_ops.h /usr/include/ATen/ops/size_ops.h \
 /usr/include/ATen/ops/slice_ops.h \
 /usr/include/ATen/ops/slice_scatter_ops.h \
 /usr/include/ATen/ops/slogdet_ops.h /usr/include/ATen/ops/smm_ops.h \
 /usr/include/ATen/ops/softmax_ops.h /usr/include/ATen/ops/sort_ops.h \
 /usr/include/ATen/ops/sparse_dim_ops.h \
 /usr/include/ATen/ops/sparse_mask_ops.h \
 /usr/include/ATen/ops/sparse_resize_and_clear_ops.h \
 /usr/include/ATen/ops/sparse_resize_ops.h \
 /usr/include/ATen/ops/split_ops.h \
 /usr/include/ATen/ops/split_with_sizes_ops.h \
 /usr/include/ATen/ops/sqrt_ops.h /usr/include/ATen/ops/square_ops.h \
 /usr/include/ATen/ops/squeeze_ops.h /usr/include/ATen/ops/sspaddmm_ops.h \
 /usr/include/ATen/ops/std_ops.h /usr/include/ATen/ops/stft_ops.h \
 /usr/include/ATen/ops/stride_ops.h /usr/include/ATen/ops/sub_ops.h \
 /usr/include/ATen/ops/subtract_ops.h /usr/include/ATen/ops/sum_ops.h \
 /usr/include/ATen/ops/sum_to_size_ops.h /usr/include/ATen/ops/svd_ops.h \
 /usr/include/ATen/ops/swapaxes_ops.h \
 /usr/include/ATen/ops/swapdims_ops.h /usr/include/ATen/ops/symeig_ops.h \
 /usr/include/ATen/ops/t_ops.h /usr/include/ATen/ops/take_along_dim_ops.h \
 /usr/include/ATen/ops/take_ops.h /usr/include/ATen/ops/tan_ops.h \
 /usr/include/ATen/ops/tanh_ops.h \
 /usr/include/ATen/ops/tensor_split_ops.h \
 /usr/include/ATen/ops/tile_ops.h /usr/include/ATen/ops/to_dense_ops.h \
 /usr/include/ATen/ops/to_mkldnn_ops.h /usr/include/ATen/ops/to_ops.h \
 /usr/include/ATen/ops/to_padded_tensor_ops.h \
 /usr/include/ATen/ops/to_sparse_bsc_ops.h \
 /usr/include/ATen/ops/to_sparse_bsr_ops.h \
 /usr/include/ATen/ops/to_sparse_csc_ops.h \
 /usr/include/ATen/ops/to_sparse_csr_ops.h \
 /usr/include/ATen/ops/to_sparse_ops.h /usr/include/ATen/ops/topk_ops.h \
 /usr/include/ATen/ops/trace_ops.h /usr/include/ATen/ops/transpose_ops.h \
 /usr/include/ATen/ops/triangular_solve_ops.h \
 /usr/include/ATen/ops/tril_ops.h /usr/include/ATen/ops/triu_ops.h \
 /usr/include/ATen/ops/true_divide_ops.h \
 /usr/include/ATen/ops/trunc_ops.h /usr/include/ATen/ops/type_as_ops.h \
 /usr/include/ATen/ops/unbind_ops.h /usr/include/ATen/ops/unflatten_ops.h \
 /usr/include/ATen/ops/unfold_ops.h /usr/include/ATen/ops/uniform_ops.h \
 /usr/include/ATen/ops/unsafe_chunk_ops.h \
 /usr/include/ATen/ops/unsafe_split_ops.h \
 /usr/include/ATen/ops/unsafe_split_with_sizes_ops.h \
 /usr/include/ATen/ops/unsqueeze_ops.h /usr/include/ATen/ops/values_ops.h \
 /usr/include/ATen/ops/var_ops.h /usr/include/ATen/ops/vdot_ops.h \
 /usr/include/ATen/ops/view_as_ops.h /usr/include/ATen/ops/view_ops.h \
 /usr/include/ATen/ops/vsplit_ops.h /usr/include/ATen/ops/where_ops.h \
 /usr/include/ATen/ops/xlogy_ops.h /usr/include/ATen/ops/xor_ops.h \
 /usr/include/ATen/ops/zero_ops.h /usr/include/ATen/core/blob.h \
 /usr/include/ATen/core/custom_class.h /usr/include/c++/12/typeindex \
 /usr/include/ATen/core/type_factory.h \
 /usr/include/ATen/core/dynamic_type.h \
 /usr/include/ATen/core/ivalue_inl.h \
 /usr/include/c++/12/condition_variable /usr/include/ATen/core/Dict.h \
 /usr/include/c10/util/order_preserving_flat_hash_map.h \
 /usr/include/ATen/core/Dict_inl.h /usr/include/c10/util/hash.h \
 /usr/include/ATen/core/functional.h /usr/include/ATen/core/jit_type.h \
 /usr/include/ATen/core/rref_interface.h \
 /usr/include/c10/core/DeviceGuard.h \
 /usr/include/c10/core/impl/InlineDeviceGuard.h \
 /usr/include/c10/core/impl/VirtualGuardImpl.h \
 /usr/include/c10/core/Event.h /usr/include/c10/core/impl/InlineEvent.h \
 /usr/include/c10/core/StreamGuard.h \
 /usr/include/c10/core/impl/InlineStreamGuard.h \
 /usr/include/c10/util/FunctionRef.h /usr/include/ATen/core/Tensor.h \
 /usr/include/ATen/DimVector.h /usr/include/ATen/Dispatch.h \
 /usr/include/ATen/Formatting.h /usr/include/ATen/core/Formatting.h \
 /usr/include/ATen/Functions.h /usr/include/ATen/TensorUtils.h \
 /usr/include/ATen/EmptyTensor.h /usr/include/ATen/Tensor.h \
 /usr/include/ATen/TensorGeometry.h /usr/include/ATen/Utils.h \
 /usr/include/ATen/TracerMode.h /usr/include/ATen/core/Reduction.h \
 /usr/include/ATen/ops/from_blob.h /usr/include/ATen/ops/tensor.h \
 /usr/include/ATen/ops/_adaptive_avg_pool2d.h \
 /usr/include/ATen/ops/_adaptive_avg_pool2d_ops.h \
 /usr/include/ATen/ops/_adaptive_avg_pool2d_backward.h \
 /usr/include/ATen/ops/_adaptive_avg_pool2d_backward_ops.h \
 /usr/include/ATen/ops/_adaptive_avg_pool3d.h \
 /usr/include/ATen/ops/_adaptive_avg_pool3d_ops.h \
 /usr/include/ATen/ops/_adaptive_avg_pool3d_backward.h \
 /usr/include/ATen/ops/_adaptive_avg_pool3d_backward_ops.h \
 /usr/include/ATen/ops/_add_batch_dim.h \
 /usr/include/ATen/ops/_add_batch_dim_ops.h \
 /usr/include/ATen/ops/_add_relu.h /usr/include/ATen/ops/_add_relu_ops.h \
 /usr/include/ATen/ops/_addmm_activation.h \
 /usr/include/ATen/ops/_aminmax.h /usr/include/ATen/ops/_aminmax_ops.h \
 /usr/include/ATen/ops/_amp_foreach_non_finite_check_and_unscale.h \
 /usr/include/ATen/ops/_amp_foreach_non_finite_check_and_unscale_ops.h \
 /usr/include/ATen/ops/_amp_update_scale.h \
 /usr/include/ATen/ops/_amp_update_scale_ops.h \
 /usr/include/ATen/ops/_assert_async.h \
 /usr/include/ATen/ops/_assert_async_ops.h \
 /usr/include/ATen/ops/_assert_tensor_metadata.h \
 /usr/include/ATen/ops/_assert_tensor_metadata_ops.h \
 /usr/include/ATen/ops/_autocast_to_full_precision.h \
 /usr/include/ATen/ops/_autocast_to_reduced_precision.h \
 /usr/include/ATen/ops/_backward.h \
 /usr/include/ATen/ops/_batch_norm_impl_index.h \
 /usr/include/ATen/ops/_batch_norm_impl_index_ops.h \
 /usr/include/ATen/ops/_batch_norm_impl_index_backward.h \
 /usr/include/ATen/ops/_batch_norm_impl_index_backward_ops.h \
 /usr/include/ATen/ops/_cast_Byte.h \
 /usr/include/ATen/ops/_cast_Byte_ops.h \
 /usr/include/ATen/ops/_cast_Char.h \
 /usr/include/ATen/ops/_cast_Char_ops.h \
 /usr/include/ATen/ops/_cast_Double.h \
 /usr/include/ATen/ops/_cast_Double_ops.h \
 /usr/include/ATen/ops/_cast_Float.h \
 /usr/include/ATen/ops/_cast_Float_ops.h \
 /usr/include/ATen/ops/_cast_Half.h \
 /usr/include/ATen/ops/_cast_Half_ops.h /usr/include/ATen/ops/_cast_Int.h \
 /usr/include/ATen/ops/_cast_Int_ops.h /usr/include/ATen/ops/_cast_Long.h \
 /usr/include/ATen/ops/_cast_Long_ops.h \
 /usr/include/ATen/ops/_cast_Short.h \
 /usr/include/ATen/ops/_cast_Short_ops.h \
 /usr/include/ATen/ops/_cdist_backward.h \
 /usr/include/ATen/ops/_cdist_backward_ops.h \
 /usr/include/ATen/ops/_cdist_forward.h \
 /usr/include/ATen/ops/_cdist_forward_ops.h \
 /usr/include/ATen/ops/_cholesky_solve_helper.h \
 /usr/include/ATen/ops/_cholesky_solve_helper_ops.h \
 /usr/include/ATen/ops/_choose_qparams_per_tensor.h \
 /usr/include/ATen/ops/_choose_qparams_per_tensor_ops.h \
 /usr/include/ATen/ops/_coalesce.h /usr/include/ATen/ops/_coalesce_ops.h \
 /usr/include/ATen/ops/_coalesced.h \
 /usr/include/ATen/ops/_compute_linear_combination.h \
 /usr/include/ATen/ops/_compute_linear_combination_ops.h \
 /usr/include/ATen/ops/_conj.h /usr/include/ATen/ops/_conj_copy.h \
 /usr/include/ATen/ops/_conj_copy_ops.h \
 /usr/include/ATen/ops/_conj_physical.h \
 /usr/include/ATen/ops/_conv_depthwise2d.h \
 /usr/include/ATen/ops/_conv_depthwise2d_ops.h \
 /usr/include/ATen/ops/_convert_indices_from_coo_to_csr.h \
 /usr/include/ATen/ops/_convert_indices_from_coo_to_csr_ops.h \
 /usr/include/ATen/ops/_convert_indices_from_csr_to_coo.h \
 /usr/include/ATen/ops/_convert_indices_from_csr_to_coo_ops.h \
 /usr/include/ATen/ops/_convolution.h \
 /usr/include/ATen/ops/_convolution_ops.h \
 /usr/include/ATen/ops/_convolution_double_backward.h \
 /usr/include/ATen/ops/_convolution_double_backward_ops.h \
 /usr/include/ATen/ops/_convolution_mode.h \
 /usr/include/ATen/ops/_convolution_mode_ops.h \
 /usr/include/ATen/ops/_copy_from.h \
 /usr/include/ATen/ops/_copy_from_ops.h \
 /usr/include/ATen/ops/_copy_from_and_resize.h \
 /usr/include/ATen/ops/_copy_from_and_resize_ops.h \
 /usr/include/ATen/ops/_ctc_loss.h /usr/include/ATen/ops/_ctc_loss_ops.h \
 /usr/include/ATen/ops/_ctc_loss_backward.h \
 /usr/include/ATen/ops/_ctc_loss_backward_ops.h \
 /usr/include/ATen/ops/_cudnn_ctc_loss.h \
 /usr/include/ATen/ops/_cudnn_ctc_loss_ops.h \
 /usr/include/ATen/ops/_cudnn_init_dropout_state.h \
 /usr/include/ATen/ops/_cudnn_init_dropout_state_ops.h \
 /usr/include/ATen/ops/_cudnn_rnn.h \
 /usr/include/ATen/ops/_cudnn_rnn_ops.h \
 /usr/include/ATen/ops/_cudnn_rnn_backward.h \
 /usr/include/ATen/ops/_cudnn_rnn_backward_ops.h \
 /usr/include/ATen/ops/_cudnn_rnn_flatten_weight.h \
 /usr/include/ATen/ops/_cudnn_rnn_flatten_weight_ops.h \
 /usr/include/ATen/ops/_cufft_clear_plan_cache.h \
 /usr/include/ATen/ops/_cufft_clear_plan_cache_ops.h \
 /usr/include/ATen/ops/_cufft_get_plan_cache_max_size.h \
 /usr/include/ATen/ops/_cufft_get_plan_cache_max_size_ops.h \
 /usr/include/ATen/ops/_cufft_get_plan_cache_size.h \
 /usr/include/ATen/ops/_cufft_get_plan_cache_size_ops.h \
 /usr/include/ATen/ops/_cufft_set_plan_cache_max_size.h \
 /usr/include/ATen/ops/_cufft_set_plan_cache_max_size_ops.h \
 /usr/include/ATen/ops/_cummax_helper.h \
 /usr/include/ATen/ops/_cummax_helper_ops.h \
 /usr/include/ATen/ops/_cummin_helper.h \
 /usr/include/ATen/ops/_cummin_helper_ops.h \
 /usr/include/ATen/ops/_debug_has_internal_overlap.h \
 /usr/include/ATen/ops/_debug_has_internal_overlap_ops.h \
 /usr/include/ATen/ops/_dimI.h /usr/include/ATen/ops/_dimV.h \
 /usr/include/ATen/ops/_dim_arange.h \
 /usr/include/ATen/ops/_dim_arange_ops.h \
 /usr/include/ATen/ops/_dirichlet_grad.h \
 /usr/include/ATen/ops/_dirichlet_grad_ops.h \
 /usr/include/ATen/ops/_efficientzerotensor.h \
 /usr/include/ATen/ops/_efficientzerotensor_ops.h \
 /usr/include/ATen/ops/_embedding_bag.h \
 /usr/include/ATen/ops/_embedding_bag_ops.h \
 /usr/include/ATen/ops/_embedding_bag_backward.h \
 /usr/include/ATen/ops/_embedding_bag_backward_ops.h \
 /usr/include/ATen/ops/_embedding_bag_dense_backward.h \
 /usr/include/ATen/ops/_embedding_bag_dense_backward_ops.h \
 /usr/include/ATen/ops/_embedding_bag_forward_only.h \
 /usr/include/ATen/ops/_embedding_bag_forward_only_ops.h \
 /usr/include/ATen/ops/_embedding_bag_per_sample_weights_backward.h \
 /usr/include/ATen/ops/_embedding_bag_per_sample_weights_backward_ops.h \
 /usr/include/ATen/ops/_embedding_bag_sparse_backward.h \
 /usr/include/ATen/ops/_embedding_bag_sparse_backward_ops.h \
 /usr/include/ATen/ops/_empty_affine_quantized.h \
 /usr/include/ATen/ops/_empty_affine_quantized_ops.h \
 /usr/include/ATen/ops/_empty_per_channel_affine_quantized.h \
 /usr/include/ATen/ops/_empty_per_channel_affine_quantized_ops.h \
 /usr/include/ATen/ops/_euclidean_dist.h \
 /usr/include/ATen/ops/_euclidean_dist_ops.h \
 /usr/include/ATen/ops/_fake_quantize_learnable_per_channel_affine.h \
 /usr/include/ATen/ops/_fake_quantize_learnable_per_channel_affine_ops.h \
 /usr/include/ATen/ops/_fake_quantize_learnable_per_channel_affine_backward.h \
 /usr/include/ATen/ops/_fake_quantize_learnable_per_channel_affine_backward_ops.h \
 /usr/include/ATen/ops/_fake_quantize_learnable_per_tensor_affine.h \
 /usr/include/ATen/ops/_fake_quantize_learnable_per_tensor_affine_ops.h \
 /usr/include/ATen/ops/_fake_quantize_learnable_per_tensor_affine_backward.h \
 /usr/include/ATen/ops/_fake_quantize_learnable_per_tensor_affine_backward_ops.h \
 /usr/include/ATen/ops/_fake_quantize_per_tensor_affine_cachemask_tensor_qparams.h \
 /usr/include/ATen/ops/_fake_quantize_per_tensor_affine_cachemask_tensor_qparams_ops.h \
 /usr/include/ATen/ops/_fft_c2c.h /usr/include/ATen/ops/_fft_c2c_ops.h \
 /usr/include/ATen/ops/_fft_c2r.h /usr/include/ATen/ops/_fft_c2r_ops.h \
 /usr/include/ATen/ops/_fft_r2c.h /usr/include/ATen/ops/_fft_r2c_ops.h \
 /usr/include/ATen/ops/_flash_scaled_dot_product_attention.h \
 /usr/include/ATen/ops/_flash_scaled_dot_product_attention_ops.h \
 /usr/include/ATen/ops/_foobar.h /usr/include/ATen/ops/_foobar_ops.h \
 /usr/include/ATen/ops/_foreach_abs.h \
 /usr/include/ATen/ops/_foreach_abs_ops.h \
 /usr/include/ATen/ops/_foreach_acos.h \
 /usr/include/ATen/ops/_foreach_acos_ops.h \
 /usr/include/ATen/ops/_foreach_add.h \
 /usr/include/ATen/ops/_foreach_add_ops.h \
 /usr/include/ATen/ops/_foreach_addcdiv.h \
 /usr/include/ATen/ops/_foreach_addcdiv_ops.h \
 /usr/include/ATen/ops/_foreach_addcmul.h \
 /usr/include/ATen/ops/_foreach_addcmul_ops.h \
 /usr/include/ATen/ops/_foreach_asin.h \
 /usr/include/ATen/ops/_foreach_asin_ops.h \
 /usr/include/ATen/ops/_foreach_atan.h \
 /usr/include/ATen/ops/_foreach_atan_ops.h \
 /usr/include/ATen/ops/_foreach_ceil.h \
 /usr/include/ATen/ops/_foreach_ceil_ops.h \
 /usr/include/ATen/ops/_foreach_cos.h \
 /usr/include/ATen/ops/_foreach_cos_ops.h \
 /usr/include/ATen/ops/_foreach_cosh.h \
 /usr/include/ATen/ops/_foreach_cosh_ops.h \
 /usr/include/ATen/ops/_foreach_div.h \
 /usr/include/ATen/ops/_foreach_div_ops.h \
 /usr/include/ATen/ops/_foreach_erf.h \
 /usr/include/ATen/ops/_foreach_erf_ops.h \
 /usr/include/ATen/ops/_foreach_erfc.h \
 /usr/include/ATen/ops/_foreach_erfc_ops.h \
 /usr/include/ATen/ops/_foreach_exp.h \
 /usr/include/ATen/ops/_foreach_exp_ops.h \
 /usr/include/ATen/ops/_foreach_expm1.h \
 /usr/include/ATen/ops/_foreach_expm1_ops.h \
 /usr/include/ATen/ops/_foreach_floor.h \
 /usr/include/ATen/ops/_foreach_floor_ops.h \
 /usr/include/ATen/ops/_foreach_frac.h \
 /usr/include/ATen/ops/_foreach_frac_ops.h \
 /usr/include/ATen/ops/_foreach_lgamma.h \
 /usr/include/ATen/ops/_foreach_lgamma_ops.h \
 /usr/include/ATen/ops/_foreach_log.h \
 /usr/include/ATen/ops/_foreach_log_ops.h \
 /usr/include/ATen/ops/_foreach_log10.h \
 /usr/include/ATen/ops/_foreach_log10_ops.h \
 /usr/include/ATen/ops/_foreach_log1p.h \
 /usr/include/ATen/ops/_foreach_log1p_ops.h \
 /usr/include/ATen/ops/_foreach_log2.h \
 /usr/include/ATen/ops/_foreach_log2_ops.h \
 /usr/include/ATen/ops/_foreach_maximum.h \
 /usr/include/ATen/ops/_foreach_maximum_ops.h \
 /usr/include/ATen/ops/_foreach_minimum.h \
 /usr/include/ATen/ops/_foreach_minimum_ops.h \
 /usr/include/ATen/ops/_foreach_mul.h \
 /usr/include/ATen/ops/_foreach_mul_ops.h \
 /usr/include/ATen/ops/_foreach_neg.h \
 /usr/include/ATen/ops/_foreach_neg_ops.h \
 /usr/include/ATen/ops/_foreach_norm.h \
 /usr/include/ATen/ops/_foreach_norm_ops.h \
 /usr/include/ATen/ops/_foreach_reciprocal.h \
 /usr/include/ATen/ops/_foreach_reciprocal_ops.h \
 /usr/include/ATen/ops/_foreach_round.h \
 /usr/include/ATen/ops/_foreach_round_ops.h \
 /usr/include/ATen/ops/_foreach_sigmoid.h \
 /usr/include/ATen/ops/_foreach_sigmoid_ops.h \
 /usr/include/ATen/ops/_foreach_sin.h \
 /usr/include/ATen/ops/_foreach_sin_ops.h \
 /usr/include/ATen/ops/_foreach_sinh.h \
 /usr/include/ATen/ops/_foreach_sinh_ops.h \
 /usr/include/ATen/ops/_foreach_sqrt.h \
 /usr/include/ATen/ops/_foreach_sqrt_ops.h \
 /usr/include/ATen/ops/_foreach_sub.h \
 /usr/include/ATen/ops/_foreach_sub_ops.h \
 /usr/include/ATen/ops/_foreach_tan.h \
 /usr/include/ATen/ops/_foreach_tan_ops.h \
 /usr/include/ATen/ops/_foreach_tanh.h \
 /usr/include/ATen/ops/_foreach_tanh_ops.h \
 /usr/include/ATen/ops/_foreach_trunc.h \
 /usr/include/ATen/ops/_foreach_trunc_ops.h \
 /usr/include/ATen/ops/_foreach_zero.h \
 /usr/include/ATen/ops/_foreach_zero_ops.h \
 /usr/include/ATen/ops/_fused_adam.h \
 /usr/include/ATen/ops/_fused_adam_ops.h \
 /usr/include/ATen/ops/_fused_dropout.h \
 /usr/include/ATen/ops/_fused_dropout_ops.h \
 /usr/include/ATen/ops/_fused_moving_avg_obs_fq_helper.h \
 /usr/include/ATen/ops/_fused_moving_avg_obs_fq_helper_ops.h \
 /usr/include/ATen/ops/_fw_primal.h \
 /usr/include/ATen/ops/_fw_primal_copy.h \
 /usr/include/ATen/ops/_fw_primal_copy_ops.h \
 /usr/include/ATen/ops/_gather_sparse_backward.h \
 /usr/include/ATen/ops/_gather_sparse_backward_ops.h \
 /usr/include/ATen/ops/_grid_sampler_2d_cpu_fallback.h \
 /usr/include/ATen/ops/_grid_sampler_2d_cpu_fallback_ops.h \
 /usr/include/ATen/ops/_grid_sampler_2d_cpu_fallback_backward.h \
 /usr/include/ATen/ops/_grid_sampler_2d_cpu_fallback_backward_ops.h \
 /usr/include/ATen/ops/_has_compatible_shallow_copy_type.h \
 /usr/include/ATen/ops/_has_compatible_shallow_copy_type_ops.h \
 /usr/include/ATen/ops/_has_same_storage_numel.h \
 /usr/include/ATen/ops/_has_same_storage_numel_ops.h \
 /usr/include/ATen/ops/_histogramdd_bin_edges.h \
 /usr/include/ATen/ops/_histogramdd_bin_edges_ops.h \
 /usr/include/ATen/ops/_histogramdd_from_bin_cts.h \
 /usr/include/ATen/ops/_histogramdd_from_bin_cts_ops.h \
 /usr/include/ATen/ops/_histogramdd_from_bin_tensors.h \
 /usr/include/ATen/ops/_histogramdd_from_bin_tensors_ops.h \
 /usr/include/ATen/ops/_index_put_impl.h \
 /usr/include/ATen/ops/_index_put_impl_ops.h \
 /usr/include/ATen/ops/_indices.h /usr/include/ATen/ops/_indices_copy.h \
 /usr/include/ATen/ops/_indices_copy_ops.h \
 /usr/include/ATen/ops/_is_zerotensor.h \
 /usr/include/ATen/ops/_linalg_check_errors.h \
 /usr/include/ATen/ops/_linalg_check_errors_ops.h \
 /usr/include/ATen/ops/_linalg_det.h \
 /usr/include/ATen/ops/_linalg_det_ops.h \
 /usr/include/ATen/ops/_linalg_eigh.h \
 /usr/include/ATen/ops/_linalg_eigh_ops.h \
 /usr/include/ATen/ops/_linalg_slogdet.h \
 /usr/include/ATen/ops/_linalg_slogdet_ops.h \
 /usr/include/ATen/ops/_linalg_solve_ex.h \
 /usr/include/ATen/ops/_linalg_solve_ex_ops.h \
 /usr/include/ATen/ops/_linalg_svd.h \
 /usr/include/ATen/ops/_linalg_svd_ops.h \
 /usr/include/ATen/ops/_local_scalar_dense.h \
 /usr/include/ATen/ops/_local_scalar_dense_ops.h \
 /usr/include/ATen/ops/_log_softmax.h \
 /usr/include/ATen/ops/_log_softmax_ops.h \
 /usr/include/ATen/ops/_log_softmax_backward_data.h \
 /usr/include/ATen/ops/_log_softmax_backward_data_ops.h \
 /usr/include/ATen/ops/_logcumsumexp.h \
 /usr/include/ATen/ops/_logcumsumexp_ops.h \
 /usr/include/ATen/ops/_lstm_mps.h /usr/include/ATen/ops/_lstm_mps_ops.h \
 /usr/include/ATen/ops/_lu_with_info.h \
 /usr/include/ATen/ops/_lu_with_info_ops.h \
 /usr/include/ATen/ops/_make_dual.h \
 /usr/include/ATen/ops/_make_dual_ops.h \
 /usr/include/ATen/ops/_make_dual_copy.h \
 /usr/include/ATen/ops/_make_dual_copy_ops.h \
 /usr/include/ATen/ops/_make_per_channel_quantized_tensor.h \
 /usr/include/ATen/ops/_make_per_channel_quantized_tensor_ops.h \
 /usr/include/ATen/ops/_make_per_tensor_quantized_tensor.h \
 /usr/include/ATen/ops/_make_per_tensor_quantized_tensor_ops.h \
 /usr/include/ATen/ops/_masked_scale.h \
 /usr/include/ATen/ops/_masked_scale_ops.h \
 /usr/include/ATen/ops/_masked_softmax.h \
 /usr/include/ATen/ops/_masked_softmax_ops.h \
 /usr/include/ATen/ops/_masked_softmax_backward.h \
 /usr/include/ATen/ops/_masked_softmax_backward_ops.h \
 /usr/include/ATen/ops/_mkldnn_reshape.h \
 /usr/include/ATen/ops/_mkldnn_reshape_ops.h \
 /usr/include/ATen/ops/_mkldnn_transpose.h \
 /usr/include/ATen/ops/_mkldnn_transpose_ops.h \
 /usr/include/ATen/ops/_mps_convolution.h \
 /usr/include/ATen/ops/_mps_convolution_ops.h \
 /usr/include/ATen/ops/_mps_convolution_transpose.h \
 /usr/include/ATen/ops/_mps_convolution_transpose_ops.h \
 /usr/include/ATen/ops/_mps_max_pool2d.h \
 /usr/include/ATen/ops/_mps_max_pool2d_ops.h \
 /usr/include/ATen/ops/_native_decoder_only_multi_head_attention.h \
 /usr/include/ATen/ops/_native_decoder_only_multi_head_attention_ops.h \
 /usr/include/ATen/ops/_native_multi_head_attention.h \
 /usr/include/ATen/ops/_native_multi_head_attention_ops.h \
 /usr/include/ATen/ops/_neg_view.h /usr/include/ATen/ops/_neg_view_copy.h \
 /usr/include/ATen/ops/_neg_view_copy_ops.h \
 /usr/include/ATen/ops/_nested_from_padded.h \
 /usr/include/ATen/ops/_nested_from_padded_ops.h \
 /usr/include/ATen/ops/_nested_from_padded_and_nested_example.h \
 /usr/include/ATen/ops/_nested_from_padded_and_nested_example_ops.h \
 /usr/include/ATen/ops/_nested_select_backward.h \
 /usr/include/ATen/ops/_nested_select_backward_ops.h \
 /usr/include/ATen/ops/_nested_sum_backward.h \
 /usr/include/ATen/ops/_nested_sum_backward_ops.h \
 /usr/include/ATen/ops/_nested_tensor_from_mask.h \
 /usr/include/ATen/ops/_nested_tensor_from_mask_ops.h \
 /usr/include/ATen/ops/_nested_tensor_from_mask_left_aligned.h \
 /usr/include/ATen/ops/_nested_tensor_from_mask_left_aligned_ops.h \
 /usr/include/ATen/ops/_nested_tensor_from_tensor_list.h \
 /usr/include/ATen/ops/_nested_tensor_from_tensor_list_ops.h \
 /usr/include/ATen/ops/_nested_tensor_layer_norm.h \
 /usr/include/ATen/ops/_nested_tensor_offsets.h \
 /usr/include/ATen/ops/_nested_tensor_size.h \
 /usr/include/ATen/ops/_nested_tensor_softmax_with_shape.h \
 /usr/include/ATen/ops/_nested_tensor_softmax_with_shape_ops.h \
 /usr/include/ATen/ops/_nested_tensor_strides.h \
 /usr/include/ATen/ops/_nested_view_from_buffer.h \
 /usr/include/ATen/ops/_nested_view_from_buffer_ops.h \
 /usr/include/ATen/ops/_nested_view_from_buffer_copy.h \
 /usr/include/ATen/ops/_nested_view_from_buffer_copy_ops.h \
 /usr/include/ATen/ops/_new_zeros_with_same_feature_meta.h \
 /usr/include/ATen/ops/_new_zeros_with_same_feature_meta_ops.h \
 /usr/include/ATen/ops/_nnpack_available.h \
 /usr/include/ATen/ops/_nnpack_available_ops.h \
 /usr/include/ATen/ops/_nnpack_spatial_convolution.h \
 /usr/include/ATen/ops/_nnpack_spatial_convolution_ops.h \
 /usr/include/ATen/ops/_nnz.h \
 /usr/include/ATen/ops/_pack_padded_sequence.h \
 /usr/include/ATen/ops/_pack_padded_sequence_ops.h \
 /usr/include/ATen/ops/_pack_padded_sequence_backward.h \
 /usr/include/ATen/ops/_pack_padded_sequence_backward_ops.h \
 /usr/include/ATen/ops/_pad_circular.h \
 /usr/include/ATen/ops/_pad_circular_ops.h \
 /usr/include/ATen/ops/_pad_enum.h /usr/include/ATen/ops/_pad_enum_ops.h \
 /usr/include/ATen/ops/_pad_packed_sequence.h \
 /usr/include/ATen/ops/_pad_packed_sequence_ops.h \
 /usr/include/ATen/ops/_pdist_backward.h \
 /usr/include/ATen/ops/_pdist_backward_ops.h \
 /usr/include/ATen/ops/_pdist_forward.h \
 /usr/include/ATen/ops/_pdist_forward_ops.h \
 /usr/include/ATen/ops/_pin_memory.h \
 /usr/include/ATen/ops/_pin_memory_ops.h \
 /usr/include/ATen/ops/_remove_batch_dim.h \
 /usr/include/ATen/ops/_remove_batch_dim_ops.h \
 /usr/include/ATen/ops/_reshape_alias.h \
 /usr/include/ATen/ops/_reshape_alias_copy.h \
 /usr/include/ATen/ops/_reshape_alias_copy_ops.h \
 /usr/include/ATen/ops/_reshape_from_tensor.h \
 /usr/include/ATen/ops/_reshape_from_tensor_ops.h \
 /usr/include/ATen/ops/_resize_output.h \
 /usr/include/ATen/ops/_resize_output_ops.h \
 /usr/include/ATen/ops/_rowwise_prune.h \
 /usr/include/ATen/ops/_rowwise_prune_ops.h \
 /usr/include/ATen/ops/_sample_dirichlet.h \
 /usr/include/ATen/ops/_sample_dirichlet_ops.h \
 /usr/include/ATen/ops/_saturate_weight_to_fp16.h \
 /usr/include/ATen/ops/_saturate_weight_to_fp16_ops.h \
 /usr/include/ATen/ops/_scaled_dot_product_attention.h \
 /usr/include/ATen/ops/_scaled_dot_product_attention_ops.h \
 /usr/include/ATen/ops/_scaled_dot_product_attention_forward.h \
 /usr/include/ATen/ops/_scaled_dot_product_attention_forward_ops.h \
 /usr/include/ATen/ops/_scaled_dot_product_attention_math.h \
 /usr/include/ATen/ops/_scaled_dot_product_attention_math_ops.h \
 /usr/include/ATen/ops/_segment_reduce_backward.h \
 /usr/include/ATen/ops/_segment_reduce_backward_ops.h \
 /usr/include/ATen/ops/_shape_as_tensor.h \
 /usr/include/ATen/ops/_shape_as_tensor_ops.h \
 /usr/include/ATen/ops/_slow_conv2d_backward.h \
 /usr/include/ATen/ops/_slow_conv2d_backward_ops.h \
 /usr/include/ATen/ops/_slow_conv2d_forward.h \
 /usr/include/ATen/ops/_slow_conv2d_forward_ops.h \
 /usr/include/ATen/ops/_sobol_engine_draw.h \
 /usr/include/ATen/ops/_sobol_engine_draw_ops.h \
 /usr/include/ATen/ops/_sobol_engine_ff.h \
 /usr/include/ATen/ops/_sobol_engine_ff_ops.h \
 /usr/include/ATen/ops/_sobol_engine_initialize_state.h \
 /usr/include/ATen/ops/_sobol_engine_initialize_state_ops.h \
 /usr/include/ATen/ops/_sobol_engine_scramble.h \
 /usr/include/ATen/ops/_sobol_engine_scramble_ops.h \
 /usr/include/ATen/ops/_softmax.h /usr/include/ATen/ops/_softmax_ops.h \
 /usr/include/ATen/ops/_softmax_backward_data.h \
 /usr/include/ATen/ops/_softmax_backward_data_ops.h \
 /usr/include/ATen/ops/_sparse_addmm.h \
 /usr/include/ATen/ops/_sparse_addmm_ops.h \
 /usr/include/ATen/ops/_sparse_broadcast_to.h \
 /usr/include/ATen/ops/_sparse_broadcast_to_ops.h \
 /usr/include/ATen/ops/_sparse_broadcast_to_copy.h \
 /usr/include/ATen/ops/_sparse_broadcast_to_copy_ops.h \
 /usr/include/ATen/ops/_sparse_bsc_tensor_unsafe.h \
 /usr/include/ATen/ops/_sparse_bsc_tensor_unsafe_ops.h \
 /usr/include/ATen/ops/_sparse_bsr_tensor_unsafe.h \
 /usr/include/ATen/ops/_sparse_bsr_tensor_unsafe_ops.h \
 /usr/include/ATen/ops/_sparse_compressed_tensor_unsafe.h \
 /usr/include/ATen/ops/_sparse_compressed_tensor_unsafe_ops.h \
 /usr/include/ATen/ops/_sparse_coo_tensor_unsafe.h \
 /usr/include/ATen/ops/_sparse_coo_tensor_unsafe_ops.h \
 /usr/include/ATen/ops/_sparse_coo_tensor_with_dims.h \
 /usr/include/ATen/ops/_sparse_coo_tensor_with_dims_ops.h \
 /usr/include/ATen/ops/_sparse_coo_tensor_with_dims_and_tensors.h \
 /usr/include/ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_ops.h \
 /usr/include/ATen/ops/_sparse_csc_tensor_unsafe.h \
 /usr/include/ATen/ops/_sparse_csc_tensor_unsafe_ops.h \
 /usr/include/ATen/ops/_sparse_csr_prod.h \
 /usr/include/ATen/ops/_sparse_csr_prod_ops.h \
 /usr/include/ATen/ops/_sparse_csr_sum.h \
 /usr/include/ATen/ops/_sparse_csr_sum_ops.h \
 /usr/include/ATen/ops/_sparse_csr_tensor_unsafe.h \
 /usr/include/ATen/ops/_sparse_csr_tensor_unsafe_ops.h \
 /usr/include/ATen/ops/_sparse_log_softmax.h \
 /usr/include/ATen/ops/_sparse_log_softmax_ops.h \
 /usr/include/ATen/ops/_sparse_log_softmax_backward_data.h \
 /usr/include/ATen/ops/_sparse_log_softmax_backward_data_ops.h \
 /usr/include/ATen/ops/_sparse_mask_helper.h \
 /usr/include/ATen/ops/_sparse_mask_helper_ops.h \
 /usr/include/ATen/ops/_sparse_mm.h \
 /usr/include/ATen/ops/_sparse_mm_ops.h \
 /usr/include/ATen/ops/_sparse_softmax.h \
 /usr/include/ATen/ops/_sparse_softmax_ops.h \
 /usr/include/ATen/ops/_sparse_softmax_backward_data.h \
 /usr/include/ATen/ops/_sparse_softmax_backward_data_ops.h \
 /usr/include/ATen/ops/_sparse_sparse_matmul.h \
 /usr/include/ATen/ops/_sparse_sparse_matmul_ops.h \
 /usr/include/ATen/ops/_sparse_sum.h \
 /usr/include/ATen/ops/_sparse_sum_ops.h \
 /usr/include/ATen/ops/_sparse_sum_backward.h \
 /usr/include/ATen/ops/_sparse_sum_backward_ops.h \
 /usr/include/ATen/ops/_spdiags.h /usr/include/ATen/ops/_spdiags_ops.h \
 /usr/include/ATen/ops/_stack.h /usr/include/ATen/ops/_stack_ops.h \
 /usr/include/ATen/ops/_standard_gamma.h \
 /usr/include/ATen/ops/_standard_gamma_ops.h \
 /usr/include/ATen/ops/_standard_gamma_grad.h \
 /usr/include/ATen/ops/_standard_gamma_grad_ops.h \
 /usr/include/ATen/ops/_symeig_helper.h \
 /usr/include/ATen/ops/_symeig_helper_ops.h \
 /usr/include/ATen/ops/_test_ambiguous_defaults.h \
 /usr/include/ATen/ops/_test_ambiguous_defaults_ops.h \
 /usr/include/ATen/ops/_test_autograd_multiple_dispatch.h \
 /usr/include/ATen/ops/_test_autograd_multiple_dispatch_ops.h \
 /usr/include/ATen/ops/_test_autograd_multiple_dispatch_view.h \
 /usr/include/ATen/ops/_test_autograd_multiple_dispatch_view_ops.h \
 /usr/include/ATen/ops/_test_autograd_multiple_dispatch_view_copy.h \
 /usr/include/ATen/ops/_test_autograd_multiple_dispatch_view_copy_ops.h \
 /usr/include/ATen/ops/_test_optional_filled_intlist.h \
 /usr/include/ATen/ops/_test_optional_filled_intlist_ops.h \
 /usr/include/ATen/ops/_test_optional_floatlist.h \
 /usr/include/ATen/ops/_test_optional_floatlist_ops.h \
 /usr/include/ATen/ops/_test_optional_intlist.h \
 /usr/include/ATen/ops/_test_optional_intlist_ops.h \
 /usr/include/ATen/ops/_test_serialization_subcmul.h \
 /usr/include/ATen/ops/_test_serialization_subcmul_ops.h \
 /usr/include/ATen/ops/_test_string_default.h \
 /usr/include/ATen/ops/_test_string_default_ops.h \
 /usr/include/ATen/ops/_test_warn_in_autograd.h \
 /usr/include/ATen/ops/_test_warn_in_autograd_ops.h \
 /usr/include/ATen/ops/_thnn_differentiable_gru_cell_backward.h \
 /usr/include/ATen/ops/_thnn_differentiable_gru_cell_backward_ops.h \
 /usr/include/ATen/ops/_thnn_differentiable_lstm_cell_backward.h \
 /usr/include/ATen/ops/_thnn_differentiable_lstm_cell_backward_ops.h \
 /usr/include/ATen/ops/_thnn_fused_gru_cell.h \
 /usr/include/ATen/ops/_thnn_fused_gru_cell_ops.h \
 /usr/include/ATen/ops/_thnn_fused_gru_cell_backward.h \
 /usr/include/ATen/ops/_thnn_fused_gru_cell_backward_ops.h \
 /usr/include/ATen/ops/_thnn_fused_lstm_cell.h \
 /usr/include/ATen/ops/_thnn_fused_lstm_cell_ops.h \
 /usr/include/ATen/ops/_thnn_fused_lstm_cell_backward.h \
 /usr/include/ATen/ops/_thnn_fused_lstm_cell_backward_ops.h \
 /usr/include/ATen/ops/_thnn_fused_lstm_cell_backward_impl.h \
 /usr/include/ATen/ops/_thnn_fused_lstm_cell_backward_impl_ops.h \
 /usr/include/ATen/ops/_to_copy.h /usr/include/ATen/ops/_to_copy_ops.h \
 /usr/include/ATen/ops/_to_cpu.h /usr/include/ATen/ops/_to_cpu_ops.h \
 /usr/include/ATen/ops/_to_dense.h \
 /usr/include/ATen/ops/_torch_cuda_cu_linker_symbol_op.h \
 /usr/include/ATen/ops/_torch_cuda_cu_linker_symbol_op_ops.h \
 /usr/include/ATen/ops/_transform_bias_rescale_qkv.h \
 /usr/include/ATen/ops/_transform_bias_rescale_qkv_ops.h \
 /usr/include/ATen/ops/_transformer_decoder_only_layer_fwd.h \
 /usr/include/ATen/ops/_transformer_decoder_only_layer_fwd_ops.h \
 /usr/include/ATen/ops/_transformer_encoder_layer_fwd.h \
 /usr/include/ATen/ops/_transformer_encoder_layer_fwd_ops.h \
 /usr/include/ATen/ops/_trilinear.h \
 /usr/include/ATen/ops/_trilinear_ops.h \
 /usr/include/ATen/ops/_triton_multi_head_attention.h \
 /usr/include/ATen/ops/_triton_multi_head_attention_ops.h \
 /usr/include/ATen/ops/_triton_scaled_dot_attention.h \
 /usr/include/ATen/ops/_triton_scaled_dot_attention_ops.h \
 /usr/include/ATen/ops/_unique.h /usr/include/ATen/ops/_unique_ops.h \
 /usr/include/ATen/ops/_unique2.h /usr/include/ATen/ops/_unique2_ops.h \
 /usr/include/ATen/ops/_unpack_dual.h \
 /usr/include/ATen/ops/_unpack_dual_ops.h \
 /usr/include/ATen/ops/_unsafe_view.h \
 /usr/include/ATen/ops/_unsafe_view_ops.h \
 /usr/include/ATen/ops/_upsample_bicubic2d_aa.h \
 /usr/include/ATen/ops/_upsample_bicubic2d_aa_ops.h \
 /usr/include/ATen/ops/_upsample_bicubic2d_aa_backward.h \
 /usr/include/ATen/ops/_upsample_bicubic2d_aa_backward_ops.h \
 /usr/include/ATen/ops/_upsample_bilinear2d_aa.h \
 /usr/include/ATen/ops/_upsample_bilinear2d_aa_ops.h \
 /usr/include/ATen/ops/_upsample_bilinear2d_aa_backward.h \
 /usr/include/ATen/ops/_upsample_bilinear2d_aa_backward_ops.h \
 /usr/include/ATen/ops/_upsample_nearest_exact1d.h \
 /usr/include/ATen/ops/_upsample_nearest_exact1d_ops.h \
 /usr/include/ATen/ops/_upsample_nearest_exact1d_backward.h \
 /usr/include/ATen/ops/_upsample_nearest_exact1d_backward_ops.h \
 /usr/include/ATen/ops/_upsample_nearest_exact2d.h \
 /usr/include/ATen/ops/_upsample_nearest_exact2d_ops.h \
 /usr/include/ATen/ops/_upsample_nearest_exact2d_backward.h \
 /usr/include/ATen/ops/_upsample_nearest_exact2d_backward_ops.h \
 /usr/include/ATen/ops/_upsample_nearest_exact3d.h \
 /usr/include/ATen/ops/_upsample_nearest_exact3d_ops.h \
 /usr/include/ATen/ops/_upsample_nearest_exact3d_backward.h \
 /usr/include/ATen/ops/_upsample_nearest_exact3d_backward_ops.h \
 /usr/include/ATen/ops/_use_cudnn_ctc_loss.h \
 /usr/include/ATen/ops/_use_cudnn_ctc_loss_ops.h \
 /usr/include/ATen/ops/_use_cudnn_rnn_flatten_weight.h \
 /usr/include/ATen/ops/_use_cudnn_rnn_flatten_weight_ops.h \
 /usr/include/ATen/ops/_validate_compressed_sparse_indices.h \
 /usr/include/ATen/ops/_validate_compressed_sparse_indices_ops.h \
 /usr/include/ATen/ops/_validate_sparse_bsc_tensor_args.h \
 /usr/include/ATen/ops/_validate_sparse_bsc_tensor_args_ops.h \
 /usr/include/ATen/ops/_validate_sparse_bsr_tensor_args.h \
 /usr/include/ATen/ops/_validate_sparse_bsr_tensor_args_ops.h \
 /usr/include/ATen/ops/_validate_sparse_compressed_tensor_args.h \
 /usr/include/ATen/ops/_validate_sparse_compressed_tensor_args_ops.h \
 /usr/include/ATen/ops/_validate_sparse_coo_tensor_args.h \
 /usr/include/ATen/ops/_validate_sparse_coo_tensor_args_ops.h \
 /usr/include/ATen/ops/_validate_sparse_csc_tensor_args.h \
 /usr/include/ATen/ops/_validate_sparse_csc_tensor_args_ops.h \
 /usr/include/ATen/ops/_validate_sparse_csr_tensor_args.h \
 /usr/include/ATen/ops/_validate_sparse_csr_tensor_args_ops.h \
 /usr/include/ATen/ops/_values.h /usr/include/ATen/ops/_values_copy.h \
 /usr/include/ATen/ops/_values_copy_ops.h \
 /usr/include/ATen/ops/_version.h /usr/include/ATen/ops/_weight_norm.h \
 /usr/include/ATen/ops/_weight_norm_ops.h \
 /usr/include/ATen/ops/_weight_norm_differentiable_backward.h \
 /usr/include/ATen/ops/_weight_norm_differentiable_backward_ops.h \
 /usr/include/ATen/ops/_weight_norm_interface.h \
 /usr/include/ATen/ops/_weight_norm_interface_ops.h \
 /usr/include/ATen/ops/_weight_norm_interface_backward.h \
 /usr/include/ATen/ops/_weight_norm_interface_backward_ops.h \
 /usr/include/ATen/ops/abs.h /usr/include/ATen/ops/absolute.h \
 /usr/include/ATen/ops/acos.h /usr/include/ATen/ops/acosh.h \
 /usr/include/ATen/ops/adaptive_avg_pool1d.h \
 /usr/include/ATen/ops/adaptive_avg_pool1d_ops.h \
 /usr/include/ATen/ops/adaptive_avg_pool2d.h \
 /usr/include/ATen/ops/adaptive_avg_pool2d_ops.h \
 /usr/include/ATen/ops/adaptive_avg_pool3d.h \
 /usr/include/ATen/ops/adaptive_avg_pool3d_ops.h \
 /usr/include/ATen/ops/adaptive_avg_pool3d_backward.h \
 /usr/include/ATen/ops/adaptive_avg_pool3d_backward_ops.h \
 /usr/include/ATen/ops/adaptive_max_pool1d.h \
 /usr/include/ATen/ops/adaptive_max_pool1d_ops.h \
 /usr/include/ATen/ops/adaptive_max_pool2d.h \
 /usr/include/ATen/ops/adaptive_max_pool2d_ops.h \
 /usr/include/ATen/ops/adaptive_max_pool2d_backward.h \
 /usr/include/ATen/ops/adaptive_max_pool2d_backward_ops.h \
 /usr/include/ATen/ops/adaptive_max_pool3d.h \
 /usr/include/ATen/ops/adaptive_max_pool3d_ops.h \
 /usr/include/ATen/ops/adaptive_max_pool3d_backward.h \
 /usr/include/ATen/ops/adaptive_max_pool3d_backward_ops.h \
 /usr/include/ATen/ops/add.h /usr/include/ATen/ops/addbmm.h \
 /usr/include/ATen/ops/addcdiv.h /usr/include/ATen/ops/addcmul.h \
 /usr/include/ATen/ops/addmm.h /usr/include/ATen/ops/addmv.h \
 /usr/include/ATen/ops/addr.h /usr/include/ATen/ops/adjoint.h \
 /usr/include/ATen/ops/affine_grid_generator.h \
 /usr/include/ATen/ops/affine_grid_generator_ops.h \
 /usr/include/ATen/ops/affine_grid_generator_backward.h \
 /usr/include/ATen/ops/affine_grid_generator_backward_ops.h \
 /usr/include/ATen/ops/alias.h /usr/include/ATen/ops/alias_copy.h \
 /usr/include/ATen/ops/alias_copy_ops.h /usr/include/ATen/ops/align_as.h \
 /usr/include/ATen/ops/align_tensors.h \
 /usr/include/ATen/ops/align_tensors_ops.h \
 /usr/include/ATen/ops/align_to.h /usr/include/ATen/ops/all.h \
 /usr/include/ATen/ops/allclose.h /usr/include/ATen/ops/alpha_dropout.h \
 /usr/include/ATen/ops/alpha_dropout_ops.h /usr/include/ATen/ops/amax.h \
 /usr/include/ATen/ops/amin.h /usr/include/ATen/ops/aminmax.h \
 /usr/include/ATen/ops/and.h /usr/include/ATen/ops/angle.h \
 /usr/include/ATen/ops/any.h /usr/include/ATen/ops/arange.h \
 /usr/include/ATen/ops/arange_ops.h /usr/include/ATen/ops/arccos.h \
 /usr/include/ATen/ops/arccosh.h /usr/include/ATen/ops/arcsin.h \
 /usr/include/ATen/ops/arcsinh.h /usr/include/ATen/ops/arctan.h \
 /usr/include/ATen/ops/arctan2.h /usr/include/ATen/ops/arctanh.h \
 /usr/include/ATen/ops/argmax.h /usr/include/ATen/ops/argmin.h \
 /usr/include/ATen/ops/argsort.h /usr/include/ATen/ops/argwhere.h \
 /usr/include/ATen/ops/as_strided.h \
 /usr/include/ATen/ops/as_strided_copy.h \
 /usr/include/ATen/ops/as_strided_copy_ops.h \
 /usr/include/ATen/ops/as_strided_scatter.h /usr/include/ATen/ops/asin.h \
 /usr/include/ATen/ops/asinh.h /usr/include/ATen/ops/atan.h \
 /usr/include/ATen/ops/atan2.h /usr/include/ATen/ops/atanh.h \
 /usr/include/ATen/ops/atleast_1d.h \
 /usr/include/ATen/ops/atleast_1d_ops.h \
 /usr/include/ATen/ops/atleast_2d.h \
 /usr/include/ATen/ops/atleast_2d_ops.h \
 /usr/include/ATen/ops/atleast_3d.h \
 /usr/include/ATen/ops/atleast_3d_ops.h \
 /usr/include/ATen/ops/avg_pool1d.h \
 /usr/include/ATen/ops/avg_pool1d_ops.h \
 /usr/include/ATen/ops/avg_pool2d.h \
 /usr/include/ATen/ops/avg_pool2d_ops.h \
 /usr/include/ATen/ops/avg_pool2d_backward.h \
 /usr/include/ATen/ops/avg_pool2d_backward_ops.h \
 /usr/include/ATen/ops/avg_pool3d.h \
 /usr/include/ATen/ops/avg_pool3d_ops.h \
 /usr/include/ATen/ops/avg_pool3d_backward.h \
 /usr/include/ATen/ops/avg_pool3d_backward_ops.h \
 /usr/include/ATen/ops/baddbmm.h /usr/include/ATen/ops/bartlett_window.h \
 /usr/include/ATen/ops/bartlett_window_ops.h \
 /usr/include/ATen/ops/batch_norm.h \
 /usr/include/ATen/ops/batch_norm_ops.h \
 /usr/include/ATen/ops/batch_norm_backward_elemt.h \
 /usr/include/ATen/ops/batch_norm_backward_elemt_ops.h \
 /usr/include/ATen/ops/batch_norm_backward_reduce.h \
 /usr/include/ATen/ops/batch_norm_backward_reduce_ops.h \
 /usr/include/ATen/ops/batch_norm_elemt.h \
 /usr/include/ATen/ops/batch_norm_elemt_ops.h \
 /usr/include/ATen/ops/batch_norm_gather_stats.h \
 /usr/include/ATen/ops/batch_norm_gather_stats_ops.h \
 /usr/include/ATen/ops/batch_norm_gather_stats_with_counts.h \
 /usr/include/ATen/ops/batch_norm_gather_stats_with_counts_ops.h \
 /usr/include/ATen/ops/batch_norm_stats.h \
 /usr/include/ATen/ops/batch_norm_stats_ops.h \
 /usr/include/ATen/ops/batch_norm_update_stats.h \
 /usr/include/ATen/ops/batch_norm_update_stats_ops.h \
 /usr/include/ATen/ops/bernoulli.h /usr/include/ATen/ops/bilinear.h \
 /usr/include/ATen/ops/bilinear_ops.h \
 /usr/include/ATen/ops/binary_cross_entropy.h \
 /usr/include/ATen/ops/binary_cross_entropy_ops.h \
 /usr/include/ATen/ops/binary_cross_entropy_backward.h \
 /usr/include/ATen/ops/binary_cross_entropy_backward_ops.h \
 /usr/include/ATen/ops/binary_cross_entropy_with_logits.h \
 /usr/include/ATen/ops/binary_cross_entropy_with_logits_ops.h \
 /usr/include/ATen/ops/bincount.h /usr/include/ATen/ops/binomial.h \
 /usr/include/ATen/ops/binomial_ops.h /usr/include/ATen/ops/bitwise_and.h \
 /usr/include/ATen/ops/bitwise_left_shift.h \
 /usr/include/ATen/ops/bitwise_not.h /usr/include/ATen/ops/bitwise_or.h \
 /usr/include/ATen/ops/bitwise_right_shift.h \
 /usr/include/ATen/ops/bitwise_xor.h \
 /usr/include/ATen/ops/blackman_window.h \
 /usr/include/ATen/ops/blackman_window_ops.h \
 /usr/include/ATen/ops/block_diag.h \
 /usr/include/ATen/ops/block_diag_ops.h /usr/include/ATen/ops/bmm.h \
 /usr/include/ATen/ops/broadcast_tensors.h \
 /usr/include/ATen/ops/broadcast_tensors_ops.h \
 /usr/include/ATen/ops/broadcast_to.h /usr/include/ATen/ops/bucketize.h \
 /usr/include/ATen/ops/bucketize_ops.h /usr/include/ATen/ops/can_cast.h \
 /usr/include/ATen/ops/can_cast_ops.h \
 /usr/include/ATen/ops/cartesian_prod.h \
 /usr/include/ATen/ops/cartesian_prod_ops.h /usr/include/ATen/ops/cat.h \
 /usr/include/ATen/ops/cat_ops.h /usr/include/ATen/ops/cauchy.h \
 /usr/include/ATen/ops/ccol_indices.h \
 /usr/include/ATen/ops/ccol_indices_copy.h \
 /usr/include/ATen/ops/ccol_indices_copy_ops.h \
 /usr/include/ATen/ops/cdist.h /usr/include/ATen/ops/cdist_ops.h \
 /usr/include/ATen/ops/ceil.h /usr/include/ATen/ops/celu.h \
 /usr/include/ATen/ops/celu_ops.h /usr/include/ATen/ops/chain_matmul.h \
 /usr/include/ATen/ops/chain_matmul_ops.h /usr/include/ATen/ops/chalf.h \
 /usr/include/ATen/ops/channel_shuffle.h \
 /usr/include/ATen/ops/channel_shuffle_ops.h \
 /usr/include/ATen/ops/cholesky.h \
 /usr/include/ATen/ops/cholesky_inverse.h \
 /usr/include/ATen/ops/cholesky_solve.h \
 /usr/include/ATen/ops/choose_qparams_optimized.h \
 /usr/include/ATen/ops/choose_qparams_optimized_ops.h \
 /usr/include/ATen/ops/chunk.h /usr/include/ATen/ops/clamp.h \
 /usr/include/ATen/ops/clamp_max.h /usr/include/ATen/ops/clamp_min.h \
 /usr/include/ATen/ops/clip.h /usr/include/ATen/ops/clone.h \
 /usr/include/ATen/ops/coalesce.h /usr/include/ATen/ops/col2im.h \
 /usr/include/ATen/ops/col2im_ops.h /usr/include/ATen/ops/col_indices.h \
 /usr/include/ATen/ops/col_indices_copy.h \
 /usr/include/ATen/ops/col_indices_copy_ops.h \
 /usr/include/ATen/ops/column_stack.h \
 /usr/include/ATen/ops/column_stack_ops.h \
 /usr/include/ATen/ops/combinations.h \
 /usr/include/ATen/ops/combinations_ops.h /usr/include/ATen/ops/complex.h \
 /usr/include/ATen/ops/complex_ops.h /usr/include/ATen/ops/concat.h \
 /usr/include/ATen/ops/concat_ops.h /usr/include/ATen/ops/concatenate.h \
 /usr/include/ATen/ops/concatenate_ops.h /usr/include/ATen/ops/conj.h \
 /usr/include/ATen/ops/conj_physical.h \
 /usr/include/ATen/ops/constant_pad_nd.h \
 /usr/include/ATen/ops/constant_pad_nd_ops.h \
 /usr/include/ATen/ops/contiguous.h /usr/include/ATen/ops/conv1d.h \
 /usr/include/ATen/ops/conv1d_ops.h /usr/include/ATen/ops/conv2d.h \
 /usr/include/ATen/ops/conv2d_ops.h /usr/include/ATen/ops/conv3d.h \
 /usr/include/ATen/ops/conv3d_ops.h \
 /usr/include/ATen/ops/conv_depthwise3d.h \
 /usr/include/ATen/ops/conv_depthwise3d_ops.h \
 /usr/include/ATen/ops/conv_tbc.h /usr/include/ATen/ops/conv_tbc_ops.h \
 /usr/include/ATen/ops/conv_tbc_backward.h \
 /usr/include/ATen/ops/conv_tbc_backward_ops.h \
 /usr/include/ATen/ops/conv_transpose1d.h \
 /usr/include/ATen/ops/conv_transpose1d_ops.h \
 /usr/include/ATen/ops/conv_transpose2d.h \
 /usr/include/ATen/ops/conv_transpose2d_ops.h \
 /usr/include/ATen/ops/conv_transpose3d.h \
 /usr/include/ATen/ops/conv_transpose3d_ops.h \
 /usr/include/ATen/ops/convolution.h \
 /usr/include/ATen/ops/convolution_ops.h \
 /usr/include/ATen/ops/convolution_backward.h \
 /usr/include/ATen/ops/convolution_backward_ops.h \
 /usr/include/ATen/ops/convolution_backward_overrideable.h \
 /usr/include/ATen/ops/convolution_backward_overrideable_ops.h \
 /usr/include/ATen/ops/convolution_overrideable.h \
 /usr/include/ATen/ops/convolution_overrideable_ops.h \
 /usr/include/ATen/ops/copy.h \
 /usr/include/ATen/ops/copy_sparse_to_sparse.h \
 /usr/include/ATen/ops/copy_sparse_to_sparse_ops.h \
 /usr/include/ATen/ops/copysign.h /usr/include/ATen/ops/corrcoef.h \
 /usr/include/ATen/ops/cos.h /usr/include/ATen/ops/cosh.h \
 /usr/include/ATen/ops/cosine_embedding_loss.h \
 /usr/include/ATen/ops/cosine_embedding_loss_ops.h \
 /usr/include/ATen/ops/cosine_similarity.h \
 /usr/include/ATen/ops/cosine_similarity_ops.h \
 /usr/include/ATen/ops/count_nonzero.h /usr/include/ATen/ops/cov.h \
 /usr/include/ATen/ops/cross.h /usr/include/ATen/ops/cross_entropy_loss.h \
 /usr/include/ATen/ops/cross_entropy_loss_ops.h \
 /usr/include/ATen/ops/crow_indices.h \
 /usr/include/ATen/ops/crow_indices_copy.h \
 /usr/include/ATen/ops/crow_indices_copy_ops.h \
 /usr/include/ATen/ops/ctc_loss.h /usr/include/ATen/ops/ctc_loss_ops.h \
 /usr/include/ATen/ops/cudnn_affine_grid_generator.h \
 /usr/include/ATen/ops/cudnn_affine_grid_generator_ops.h \
 /usr/include/ATen/ops/cudnn_affine_grid_generator_backward.h \
 /usr/include/ATen/ops/cudnn_affine_grid_generator_backward_ops.h \
 /usr/include/ATen/ops/cudnn_batch_norm.h \
 /usr/include/ATen/ops/cudnn_batch_norm_ops.h \
 /usr/include/ATen/ops/cudnn_batch_norm_backward.h \
 /usr/include/ATen/ops/cudnn_batch_norm_backward_ops.h \
 /usr/include/ATen/ops/cudnn_convolution.h \
 /usr/include/ATen/ops/cudnn_convolution_ops.h \
 /usr/include/ATen/ops/cudnn_convolution_add_relu.h \
 /usr/include/ATen/ops/cudnn_convolution_add_relu_ops.h \
 /usr/include/ATen/ops/cudnn_convolution_relu.h \
 /usr/include/ATen/ops/cudnn_convolution_relu_ops.h \
 /usr/include/ATen/ops/cudnn_convolution_transpose.h \
 /usr/include/ATen/ops/cudnn_convolution_transpose_ops.h \
 /usr/include/ATen/ops/cudnn_grid_sampler.h \
 /usr/include/ATen/ops/cudnn_grid_sampler_ops.h \
 /usr/include/ATen/ops/cudnn_grid_sampler_backward.h \
 /usr/include/ATen/ops/cudnn_grid_sampler_backward_ops.h \
 /usr/include/ATen/ops/cudnn_is_acceptable.h \
 /usr/include/ATen/ops/cudnn_is_acceptable_ops.h \
 /usr/include/ATen/ops/cummax.h \
 /usr/include/ATen/ops/cummaxmin_backward.h \
 /usr/include/ATen/ops/cummaxmin_backward_ops.h \
 /usr/include/ATen/ops/cummin.h /usr/include/ATen/ops/cumprod.h \
 /usr/include/ATen/ops/cumprod_backward.h \
 /usr/include/ATen/ops/cumprod_backward_ops.h \
 /usr/include/ATen/ops/cumsum.h \
 /usr/include/ATen/ops/cumulative_trapezoid.h \
 /usr/include/ATen/ops/cumulative_trapezoid_ops.h \
 /usr/include/ATen/ops/data.h /usr/include/ATen/ops/deg2rad.h \
 /usr/include/ATen/ops/dense_dim.h /usr/include/ATen/ops/dequantize.h \
 /usr/include/ATen/ops/det.h /usr/include/ATen/ops/detach.h \
 /usr/include/ATen/ops/detach_copy.h \
 /usr/include/ATen/ops/detach_copy_ops.h /usr/include/ATen/ops/diag.h \
 /usr/include/ATen/ops/diag_backward.h \
 /usr/include/ATen/ops/diag_backward_ops.h \
 /usr/include/ATen/ops/diag_embed.h /usr/include/ATen/ops/diagflat.h \
 /usr/include/ATen/ops/diagonal.h \
 /usr/include/ATen/ops/diagonal_backward.h \
 /usr/include/ATen/ops/diagonal_backward_ops.h \
 /usr/include/ATen/ops/diagonal_copy.h \
 /usr/include/ATen/ops/diagonal_copy_ops.h \
 /usr/include/ATen/ops/diagonal_scatter.h /usr/include/ATen/ops/diff.h \
 /usr/include/ATen/ops/digamma.h /usr/include/ATen/ops/dist.h \
 /usr/include/ATen/ops/div.h /usr/include/ATen/ops/divide.h \
 /usr/include/ATen/ops/dot.h /usr/include/ATen/ops/dropout.h \
 /usr/include/ATen/ops/dropout_ops.h /usr/include/ATen/ops/dsplit.h \
 /usr/include/ATen/ops/dstack.h /usr/include/ATen/ops/dstack_ops.h \
 /usr/include/ATen/ops/einsum.h /usr/include/ATen/ops/einsum_ops.h \
 /usr/include/ATen/ops/elu.h /usr/include/ATen/ops/elu_ops.h \
 /usr/include/ATen/ops/elu_backward.h \
 /usr/include/ATen/ops/elu_backward_ops.h \
 /usr/include/ATen/ops/embedding.h /usr/include/ATen/ops/embedding_ops.h \
 /usr/include/ATen/ops/embedding_backward.h \
 /usr/include/ATen/ops/embedding_backward_ops.h \
 /usr/include/ATen/ops/embedding_bag.h \
 /usr/include/ATen/ops/embedding_bag_ops.h \
 /usr/include/ATen/ops/embedding_dense_backward.h \
 /usr/include/ATen/ops/embedding_dense_backward_ops.h \
 /usr/include/ATen/ops/embedding_renorm.h \
 /usr/include/ATen/ops/embedding_renorm_ops.h \
 /usr/include/ATen/ops/embedding_sparse_backward.h \
 /usr/include/ATen/ops/embedding_sparse_backward_ops.h \
 /usr/include/ATen/ops/empty.h /usr/include/ATen/ops/empty_ops.h \
 /usr/include/ATen/ops/empty_like.h \
 /usr/include/ATen/ops/empty_like_ops.h \
 /usr/include/ATen/ops/empty_quantized.h \
 /usr/include/ATen/ops/empty_quantized_ops.h \
 /usr/include/ATen/ops/empty_strided.h \
 /usr/include/ATen/ops/empty_strided_ops.h /usr/include/ATen/ops/eq.h \
 /usr/include/ATen/ops/equal.h /usr/include/ATen/ops/erf.h \
 /usr/include/ATen/ops/erfc.h /usr/include/ATen/ops/erfinv.h \
 /usr/include/ATen/ops/exp.h /usr/include/ATen/ops/exp2.h \
 /usr/include/ATen/ops/expand.h /usr/include/ATen/ops/expand_as.h \
 /usr/include/ATen/ops/expand_copy.h \
 /usr/include/ATen/ops/expand_copy_ops.h /usr/include/ATen/ops/expm1.h \
 /usr/include/ATen/ops/exponential.h /usr/include/ATen/ops/eye.h \
 /usr/include/ATen/ops/eye_ops.h \
 /usr/include/ATen/ops/fake_quantize_per_channel_affine.h \
 /usr/include/ATen/ops/fake_quantize_per_channel_affine_ops.h \
 /usr/include/ATen/ops/fake_quantize_per_channel_affine_cachemask.h \
 /usr/include/ATen/ops/fake_quantize_per_channel_affine_cachemask_ops.h \
 /usr/include/ATen/ops/fake_quantize_per_channel_affine_cachemask_backward.h \
 /usr/include/ATen/ops/fake_quantize_per_channel_affine_cachemask_backward_ops.h \
 /usr/include/ATen/ops/fake_quantize_per_tensor_affine.h \
 /usr/include/ATen/ops/fake_quantize_per_tensor_affine_ops.h \
 /usr/include/ATen/ops/fake_quantize_per_tensor_affine_cachemask.h \
 /usr/include/ATen/ops/fake_quantize_per_tensor_affine_cachemask_ops.h \
 /usr/include/ATen/ops/fake_quantize_per_tensor_affine_cachemask_backward.h \
 /usr/include/ATen/ops/fake_quantize_per_tensor_affine_cachemask_backward_ops.h \
 /usr/include/ATen/ops/fbgemm_linear_fp16_weight.h \
 /usr/include/ATen/ops/fbgemm_linear_fp16_weight_ops.h \
 /usr/include/ATen/ops/fbgemm_linear_fp16_weight_fp32_activation.h \
 /usr/include/ATen/ops/fbgemm_linear_fp16_weight_fp32_activation_ops.h \
 /usr/include/ATen/ops/fbgemm_linear_int8_weight.h \
 /usr/include/ATen/ops/fbgemm_linear_int8_weight_ops.h \
 /usr/include/ATen/ops/fbgemm_linear_int8_weight_fp32_activation.h \
 /usr/include/ATen/ops/fbgemm_linear_int8_weight_fp32_activation_ops.h \
 /usr/include/ATen/ops/fbgemm_linear_quantize_weight.h \
 /usr/include/ATen/ops/fbgemm_linear_quantize_weight_ops.h \
 /usr/include/ATen/ops/fbgemm_pack_gemm_matrix_fp16.h \
 /usr/include/ATen/ops/fbgemm_pack_gemm_matrix_fp16_ops.h \
 /usr/include/ATen/ops/fbgemm_pack_quantized_matrix.h \
 /usr/include/ATen/ops/fbgemm_pack_quantized_matrix_ops.h \
 /usr/include/ATen/ops/feature_alpha_dropout.h \
 /usr/include/ATen/ops/feature_alpha_dropout_ops.h \
 /usr/include/ATen/ops/feature_dropout.h \
 /usr/include/ATen/ops/feature_dropout_ops.h \
 /usr/include/ATen/ops/fft_fft.h /usr/include/ATen/ops/fft_fft_ops.h \
 /usr/include/ATen/ops/fft_fft2.h /usr/include/ATen/ops/fft_fft2_ops.h \
 /usr/include/ATen/ops/fft_fftfreq.h \
 /usr/include/ATen/ops/fft_fftfreq_ops.h /usr/include/ATen/ops/fft_fftn.h \
 /usr/include/ATen/ops/fft_fftn_ops.h \
 /usr/include/ATen/ops/fft_fftshift.h \
 /usr/include/ATen/ops/fft_fftshift_ops.h \
 /usr/include/ATen/ops/fft_hfft.h /usr/include/ATen/ops/fft_hfft_ops.h \
 /usr/include/ATen/ops/fft_hfft2.h /usr/include/ATen/ops/fft_hfft2_ops.h \
 /usr/include/ATen/ops/fft_hfftn.h /usr/include/ATen/ops/fft_hfftn_ops.h \
 /usr/include/ATen/ops/fft_ifft.h /usr/include/ATen/ops/fft_ifft_ops.h \
 /usr/include/ATen/ops/fft_ifft2.h /usr/include/ATen/ops/fft_ifft2_ops.h \
 /usr/include/ATen/ops/fft_ifftn.h /usr/include/ATen/ops/fft_ifftn_ops.h \
 /usr/include/ATen/ops/fft_ifftshift.h \
 /usr/include/ATen/ops/fft_ifftshift_ops.h \
 /usr/include/ATen/ops/fft_ihfft.h /usr/include/ATen/ops/fft_ihfft_ops.h \
 /usr/include/ATen/ops/fft_ihfft2.h \
 /usr/include/ATen/ops/fft_ihfft2_ops.h \
 /usr/include/ATen/ops/fft_ihfftn.h \
 /usr/include/ATen/ops/fft_ihfftn_ops.h /usr/include/ATen/ops/fft_irfft.h \
 /usr/include/ATen/ops/fft_irfft_ops.h /usr/include/ATen/ops/fft_irfft2.h \
 /usr/include/ATen/ops/fft_irfft2_ops.h \
 /usr/include/ATen/ops/fft_irfftn.h \
 /usr/include/ATen/ops/fft_irfftn_ops.h /usr/include/ATen/ops/fft_rfft.h \
 /usr/include/ATen/ops/fft_rfft_ops.h /usr/include/ATen/ops/fft_rfft2.h \
 /usr/include/ATen/ops/fft_rfft2_ops.h \
 /usr/include/ATen/ops/fft_rfftfreq.h \
 /usr/include/ATen/ops/fft_rfftfreq_ops.h \
 /usr/include/ATen/ops/fft_rfftn.h /usr/include/ATen/ops/fft_rfftn_ops.h \
 /usr/include/ATen/ops/fill.h /usr/include/ATen/ops/fill_diagonal.h \
 /usr/include/ATen/ops/fix.h /usr/include/ATen/ops/flatten.h \
 /usr/include/ATen/ops/flatten_dense_tensors.h \
 /usr/include/ATen/ops/flatten_dense_tensors_ops.h \
 /usr/include/ATen/ops/flip.h /usr/include/ATen/ops/fliplr.h \
 /usr/include/ATen/ops/flipud.h /usr/include/ATen/ops/float_power.h \
 /usr/include/ATen/ops/floor.h /usr/include/ATen/ops/floor_divide.h \
 /usr/include/ATen/ops/fmax.h /usr/include/ATen/ops/fmin.h \
 /usr/include/ATen/ops/fmod.h /usr/include/ATen/ops/frac.h \
 /usr/include/ATen/ops/fractional_max_pool2d.h \
 /usr/include/ATen/ops/fractional_max_pool2d_ops.h \
 /usr/include/ATen/ops/fractional_max_pool2d_backward.h \
 /usr/include/ATen/ops/fractional_max_pool2d_backward_ops.h \
 /usr/include/ATen/ops/fractional_max_pool3d.h \
 /usr/include/ATen/ops/fractional_max_pool3d_ops.h \
 /usr/include/ATen/ops/fractional_max_pool3d_backward.h \
 /usr/include/ATen/ops/fractional_max_pool3d_backward_ops.h \
 /usr/include/ATen/ops/frexp.h /usr/include/ATen/ops/frobenius_norm.h \
 /usr/include/ATen/ops/frobenius_norm_ops.h \
 /usr/include/ATen/ops/from_file.h /usr/include/ATen/ops/from_file_ops.h \
 /usr/include/ATen/ops/full.h /usr/include/ATen/ops/full_ops.h \
 /usr/include/ATen/ops/full_like.h /usr/include/ATen/ops/full_like_ops.h \
 /usr/include/ATen/ops/fused_moving_avg_obs_fake_quant.h \
 /usr/include/ATen/ops/fused_moving_avg_obs_fake_quant_ops.h \
 /usr/include/ATen/ops/gather.h /usr/include/ATen/ops/gather_backward.h \
 /usr/include/ATen/ops/gather_backward_ops.h /usr/include/ATen/ops/gcd.h \
 /usr/include/ATen/ops/ge.h /usr/include/ATen/ops/gelu.h \
 /usr/include/ATen/ops/gelu_ops.h /usr/include/ATen/ops/gelu_backward.h \
 /usr/include/ATen/ops/gelu_backward_ops.h \
 /usr/include/ATen/ops/geometric.h /usr/include/ATen/ops/geqrf.h \
 /usr/include/ATen/ops/ger.h /usr/include/ATen/ops/glu.h \
 /usr/include/ATen/ops/glu_ops.h /usr/include/ATen/ops/glu_backward.h \
 /usr/include/ATen/ops/glu_backward_ops.h \
 /usr/include/ATen/ops/glu_backward_jvp.h \
 /usr/include/ATen/ops/glu_backward_jvp_ops.h \
 /usr/include/ATen/ops/glu_jvp.h /usr/include/ATen/ops/glu_jvp_ops.h \
 /usr/include/ATen/ops/gradient.h /usr/include/ATen/ops/gradient_ops.h \
 /usr/include/ATen/ops/greater.h /usr/include/ATen/ops/greater_equal.h \
 /usr/include/ATen/ops/grid_sampler.h \
 /usr/include/ATen/ops/grid_sampler_ops.h \
 /usr/include/ATen/ops/grid_sampler_2d.h \
 /usr/include/ATen/ops/grid_sampler_2d_ops.h \
 /usr/include/ATen/ops/grid_sampler_2d_backward.h \
 /usr/include/ATen/ops/grid_sampler_2d_backward_ops.h \
 /usr/include/ATen/ops/grid_sampler_3d.h \
 /usr/include/ATen/ops/grid_sampler_3d_ops.h \
 /usr/include/ATen/ops/grid_sampler_3d_backward.h \
 /usr/include/ATen/ops/grid_sampler_3d_backward_ops.h \
 /usr/include/ATen/ops/group_norm.h \
 /usr/include/ATen/ops/group_norm_ops.h /usr/include/ATen/ops/gru.h \
 /usr/include/ATen/ops/gru_ops.h /usr/include/ATen/ops/gru_cell.h \
 /usr/include/ATen/ops/gru_cell_ops.h /usr/include/ATen/ops/gt.h \
 /usr/include/ATen/ops/hamming_window.h \
 /usr/include/ATen/ops/hamming_window_ops.h \
 /usr/include/ATen/ops/hann_window.h \
 /usr/include/ATen/ops/hann_window_ops.h \
 /usr/include/ATen/ops/hardshrink.h \
 /usr/include/ATen/ops/hardshrink_backward.h \
 /usr/include/ATen/ops/hardsigmoid.h \
 /usr/include/ATen/ops/hardsigmoid_ops.h \
 /usr/include/ATen/ops/hardsigmoid_backward.h \
 /usr/include/ATen/ops/hardsigmoid_backward_ops.h \
 /usr/include/ATen/ops/hardswish.h /usr/include/ATen/ops/hardswish_ops.h \
 /usr/include/ATen/ops/hardswish_backward.h \
 /usr/include/ATen/ops/hardswish_backward_ops.h \
 /usr/include/ATen/ops/hardtanh.h /usr/include/ATen/ops/hardtanh_ops.h \
 /usr/include/ATen/ops/hardtanh_backward.h \
 /usr/include/ATen/ops/hardtanh_backward_ops.h \
 /usr/include/ATen/ops/heaviside.h \
 /usr/include/ATen/ops/hinge_embedding_loss.h \
 /usr/include/ATen/ops/hinge_embedding_loss_ops.h \
 /usr/include/ATen/ops/histc.h /usr/include/ATen/ops/histogram.h \
 /usr/include/ATen/ops/histogramdd.h \
 /usr/include/ATen/ops/histogramdd_ops.h /usr/include/ATen/ops/hsplit.h \
 /usr/include/ATen/ops/hspmm.h /usr/include/ATen/ops/hspmm_ops.h \
 /usr/include/ATen/ops/hstack.h /usr/include/ATen/ops/hstack_ops.h \
 /usr/include/ATen/ops/huber_loss.h \
 /usr/include/ATen/ops/huber_loss_ops.h \
 /usr/include/ATen/ops/huber_loss_backward.h \
 /usr/include/ATen/ops/huber_loss_backward_ops.h \
 /usr/include/ATen/ops/hypot.h /usr/include/ATen/ops/i0.h \
 /usr/include/ATen/ops/igamma.h /usr/include/ATen/ops/igammac.h \
 /usr/include/ATen/ops/im2col.h /usr/include/ATen/ops/im2col_ops.h \
 /usr/include/ATen/ops/imag.h /usr/include/ATen/ops/imag_ops.h \
 /usr/include/ATen/ops/index.h /usr/include/ATen/ops/index_add.h \
 /usr/include/ATen/ops/index_copy.h /usr/include/ATen/ops/index_fill.h \
 /usr/include/ATen/ops/index_put.h /usr/include/ATen/ops/index_reduce.h \
 /usr/include/ATen/ops/index_select.h \
 /usr/include/ATen/ops/index_select_backward.h \
 /usr/include/ATen/ops/index_select_backward_ops.h \
 /usr/include/ATen/ops/indices.h /usr/include/ATen/ops/indices_copy.h \
 /usr/include/ATen/ops/indices_copy_ops.h \
 /usr/include/ATen/ops/infinitely_differentiable_gelu_backward.h \
 /usr/include/ATen/ops/infinitely_differentiable_gelu_backward_ops.h \
 /usr/include/ATen/ops/inner.h /usr/include/ATen/ops/instance_norm.h \
 /usr/include/ATen/ops/instance_norm_ops.h \
 /usr/include/ATen/ops/int_repr.h /usr/include/ATen/ops/inverse.h \
 /usr/include/ATen/ops/is_coalesced.h /usr/include/ATen/ops/is_complex.h \
 /usr/include/ATen/ops/is_conj.h /usr/include/ATen/ops/is_distributed.h \
 /usr/include/ATen/ops/is_floating_point.h \
 /usr/include/ATen/ops/is_inference.h /usr/include/ATen/ops/is_leaf.h \
 /usr/include/ATen/ops/is_neg.h /usr/include/ATen/ops/is_nonzero.h \
 /usr/include/ATen/ops/is_pinned.h /usr/include/ATen/ops/is_same_size.h \
 /usr/include/ATen/ops/is_set_to.h /usr/include/ATen/ops/is_signed.h \
 /usr/include/ATen/ops/is_vulkan_available.h \
 /usr/include/ATen/ops/is_vulkan_available_ops.h \
 /usr/include/ATen/ops/isclose.h /usr/include/ATen/ops/isfinite.h \
 /usr/include/ATen/ops/isin.h /usr/include/ATen/ops/isin_ops.h \
 /usr/include/ATen/ops/isinf.h /usr/include/ATen/ops/isnan.h \
 /usr/include/ATen/ops/isneginf.h /usr/include/ATen/ops/isposinf.h \
 /usr/include/ATen/ops/isreal.h /usr/include/ATen/ops/istft.h \
 /usr/include/ATen/ops/item.h /usr/include/ATen/ops/kaiser_window.h \
 /usr/include/ATen/ops/kaiser_window_ops.h /usr/include/ATen/ops/kl_div.h \
 /usr/include/ATen/ops/kl_div_ops.h /usr/include/ATen/ops/kron.h \
 /usr/include/ATen/ops/kthvalue.h /usr/include/ATen/ops/l1_loss.h \
 /usr/include/ATen/ops/l1_loss_ops.h /usr/include/ATen/ops/layer_norm.h \
 /usr/include/ATen/ops/layer_norm_ops.h /usr/include/ATen/ops/lcm.h \
 /usr/include/ATen/ops/ldexp.h /usr/include/ATen/ops/le.h \
 /usr/include/ATen/ops/leaky_relu.h \
 /usr/include/ATen/ops/leaky_relu_ops.h \
 /usr/include/ATen/ops/leaky_relu_backward.h \
 /usr/include/ATen/ops/leaky_relu_backward_ops.h \
 /usr/include/ATen/ops/lerp.h /usr/include/ATen/ops/less.h \
 /usr/include/ATen/ops/less_equal.h /usr/include/ATen/ops/lgamma.h \
 /usr/include/ATen/ops/lift.h /usr/include/ATen/ops/lift_ops.h \
 /usr/include/ATen/ops/lift_fresh.h \
 /usr/include/ATen/ops/lift_fresh_ops.h \
 /usr/include/ATen/ops/lift_fresh_copy.h \
 /usr/include/ATen/ops/lift_fresh_copy_ops.h \
 /usr/include/ATen/ops/linalg_cholesky.h \
 /usr/include/ATen/ops/linalg_cholesky_ops.h \
 /usr/include/ATen/ops/linalg_cholesky_ex.h \
 /usr/include/ATen/ops/linalg_cholesky_ex_ops.h \
 /usr/include/ATen/ops/linalg_cond.h \
 /usr/include/ATen/ops/linalg_cond_ops.h \
 /usr/include/ATen/ops/linalg_cross.h \
 /usr/include/ATen/ops/linalg_cross_ops.h \
 /usr/include/ATen/ops/linalg_det.h \
 /usr/include/ATen/ops/linalg_det_ops.h \
 /usr/include/ATen/ops/linalg_diagonal.h \
 /usr/include/ATen/ops/linalg_diagonal_ops.h \
 /usr/include/ATen/ops/linalg_eig.h \
 /usr/include/ATen/ops/linalg_eig_ops.h \
 /usr/include/ATen/ops/linalg_eigh.h \
 /usr/include/ATen/ops/linalg_eigh_ops.h \
 /usr/include/ATen/ops/linalg_eigvals.h \
 /usr/include/ATen/ops/linalg_eigvals_ops.h \
 /usr/include/ATen/ops/linalg_eigvalsh.h \
 /usr/include/ATen/ops/linalg_eigvalsh_ops.h \
 /usr/include/ATen/ops/linalg_householder_product.h \
 /usr/include/ATen/ops/linalg_householder_product_ops.h \
 /usr/include/ATen/ops/linalg_inv.h \
 /usr/include/ATen/ops/linalg_inv_ops.h \
 /usr/include/ATen/ops/linalg_inv_ex.h \
 /usr/include/ATen/ops/linalg_inv_ex_ops.h \
 /usr/include/ATen/ops/linalg_ldl_factor.h \
 /usr/include/ATen/ops/linalg_ldl_factor_ops.h \
 /usr/include/ATen/ops/linalg_ldl_factor_ex.h \
 /usr/include/ATen/ops/linalg_ldl_factor_ex_ops.h \
 /usr/include/ATen/ops/linalg_ldl_solve.h \
 /usr/include/ATen/ops/linalg_ldl_solve_ops.h \
 /usr/include/ATen/ops/linalg_lstsq.h \
 /usr/include/ATen/ops/linalg_lstsq_ops.h \
 /usr/include/ATen/ops/linalg_lu.h /usr/include/ATen/ops/linalg_lu_ops.h \
 /usr/include/ATen/ops/linalg_lu_factor.h \
 /usr/include/ATen/ops/linalg_lu_factor_ops.h \
 /usr/include/ATen/ops/linalg_lu_factor_ex.h \
 /usr/include/ATen/ops/linalg_lu_factor_ex_ops.h \
 /usr/include/ATen/ops/linalg_lu_solve.h \
 /usr/include/ATen/ops/linalg_lu_solve_ops.h \
 /usr/include/ATen/ops/linalg_matmul.h \
 /usr/include/ATen/ops/linalg_matmul_ops.h \
 /usr/include/ATen/ops/linalg_matrix_exp.h \
 /usr/include/ATen/ops/linalg_matrix_exp_ops.h \
 /usr/include/ATen/ops/linalg_matrix_norm.h \
 /usr/include/ATen/ops/linalg_matrix_norm_ops.h \
 /usr/include/ATen/ops/linalg_matrix_power.h \
 /usr/include/ATen/ops/linalg_matrix_power_ops.h \
 /usr/include/ATen/ops/linalg_matrix_rank.h \
 /usr/include/ATen/ops/linalg_matrix_rank_ops.h \
 /usr/include/ATen/ops/linalg_multi_dot.h \
 /usr/include/ATen/ops/linalg_multi_dot_ops.h \
 /usr/include/ATen/ops/linalg_norm.h \
 /usr/include/ATen/ops/linalg_norm_ops.h \
 /usr/include/ATen/ops/linalg_pinv.h \
 /usr/include/ATen/ops/linalg_pinv_ops.h \
 /usr/include/ATen/ops/linalg_qr.h /usr/include/ATen/ops/linalg_qr_ops.h \
 /usr/include/ATen/ops/linalg_slogdet.h \
 /usr/include/ATen/ops/linalg_slogdet_ops.h \
 /usr/include/ATen/ops/linalg_solve.h \
 /usr/include/ATen/ops/linalg_solve_ops.h \
 /usr/include/ATen/ops/linalg_solve_ex.h \
 /usr/include/ATen/ops/linalg_solve_ex_ops.h \
 /usr/include/ATen/ops/linalg_solve_triangular.h \
 /usr/include/ATen/ops/linalg_solve_triangular_ops.h \
 /usr/include/ATen/ops/linalg_svd.h \
 /usr/include/ATen/ops/linalg_svd_ops.h \
 /usr/include/ATen/ops/linalg_svdvals.h \
 /usr/include/ATen/ops/linalg_svdvals_ops.h \
 /usr/include/ATen/ops/linalg_tensorinv.h \
 /usr/include/ATen/ops/linalg_tensorinv_ops.h \
 /usr/include/ATen/ops/linalg_tensorsolve.h \
 /usr/include/ATen/ops/linalg_tensorsolve_ops.h \
 /usr/include/ATen/ops/linalg_vander.h \
 /usr/include/ATen/ops/linalg_vander_ops.h \
 /usr/include/ATen/ops/linalg_vecdot.h \
 /usr/include/ATen/ops/linalg_vecdot_ops.h \
 /usr/include/ATen/ops/linalg_vector_norm.h \
 /usr/include/ATen/ops/linalg_vector_norm_ops.h \
 /usr/include/ATen/ops/linear.h /usr/include/ATen/ops/linear_ops.h \
 /usr/include/ATen/ops/linear_backward.h \
 /usr/include/ATen/ops/linear_backward_ops.h \
 /usr/include/ATen/ops/linspace.h /usr/include/ATen/ops/linspace_ops.h \
 /usr/include/ATen/ops/log.h /usr/include/ATen/ops/log10.h \
 /usr/include/ATen/ops/log1p.h /usr/include/ATen/ops/log2.h \
 /usr/include/ATen/ops/log_normal.h /usr/include/ATen/ops/log_sigmoid.h \
 /usr/include/ATen/ops/log_sigmoid_ops.h \
 /usr/include/ATen/ops/log_sigmoid_backward.h \
 /usr/include/ATen/ops/log_sigmoid_backward_ops.h \
 /usr/include/ATen/ops/log_sigmoid_forward.h \
 /usr/include/ATen/ops/log_sigmoid_forward_ops.h \
 /usr/include/ATen/ops/log_softmax.h /usr/include/ATen/ops/logaddexp.h \
 /usr/include/ATen/ops/logaddexp2.h /usr/include/ATen/ops/logcumsumexp.h \
 /usr/include/ATen/ops/logdet.h /usr/include/ATen/ops/logical_and.h \
 /usr/include/ATen/ops/logical_not.h /usr/include/ATen/ops/logical_or.h \
 /usr/include/ATen/ops/logical_xor.h /usr/include/ATen/ops/logit.h \
 /usr/include/ATen/ops/logit_backward.h \
 /usr/include/ATen/ops/logit_backward_ops.h \
 /usr/include/ATen/ops/logspace.h /usr/include/ATen/ops/logspace_ops.h \
 /usr/include/ATen/ops/logsumexp.h /usr/include/ATen/ops/lshift.h \
 /usr/include/ATen/ops/lstm.h /usr/include/ATen/ops/lstm_ops.h \
 /usr/include/ATen/ops/lstm_cell.h /usr/include/ATen/ops/lstm_cell_ops.h \
 /usr/include/ATen/ops/lstm_mps_backward.h \
 /usr/include/ATen/ops/lstm_mps_backward_ops.h /usr/include/ATen/ops/lt.h \
 /usr/include/ATen/ops/lu_solve.h /usr/include/ATen/ops/lu_unpack.h \
 /usr/include/ATen/ops/lu_unpack_ops.h /usr/include/ATen/ops/mH.h \
 /usr/include/ATen/ops/mT.h /usr/include/ATen/ops/margin_ranking_loss.h \
 /usr/include/ATen/ops/margin_ranking_loss_ops.h \
 /usr/include/ATen/ops/masked_fill.h \
 /usr/include/ATen/ops/masked_scatter.h \
 /usr/include/ATen/ops/masked_select.h \
 /usr/include/ATen/ops/masked_select_backward.h \
 /usr/include/ATen/ops/masked_select_backward_ops.h \
 /usr/include/ATen/ops/matmul.h /usr/include/ATen/ops/matmul_backward.h \
 /usr/include/ATen/ops/matmul_backward_ops.h \
 /usr/include/ATen/ops/matrix_H.h /usr/include/ATen/ops/matrix_exp.h \
 /usr/include/ATen/ops/matrix_exp_backward.h \
 /usr/include/ATen/ops/matrix_exp_backward_ops.h \
 /usr/include/ATen/ops/matrix_power.h /usr/include/ATen/ops/max.h \
 /usr/include/ATen/ops/max_pool1d.h \
 /usr/include/ATen/ops/max_pool1d_ops.h \
 /usr/include/ATen/ops/max_pool1d_with_indices.h \
 /usr/include/ATen/ops/max_pool1d_with_indices_ops.h \
 /usr/include/ATen/ops/max_pool2d.h \
 /usr/include/ATen/ops/max_pool2d_ops.h \
 /usr/include/ATen/ops/max_pool2d_with_indices.h \
 /usr/include/ATen/ops/max_pool2d_with_indices_ops.h \
 /usr/include/ATen/ops/max_pool2d_with_indices_backward.h \
 /usr/include/ATen/ops/max_pool2d_with_indices_backward_ops.h \
 /usr/include/ATen/ops/max_pool3d.h \
 /usr/include/ATen/ops/max_pool3d_ops.h \
 /usr/include/ATen/ops/max_pool3d_with_indices.h \
 /usr/include/ATen/ops/max_pool3d_with_indices_ops.h \
 /usr/include/ATen/ops/max_pool3d_with_indices_backward.h \
 /usr/include/ATen/ops/max_pool3d_with_indices_backward_ops.h \
 /usr/include/ATen/ops/max_unpool2d.h \
 /usr/include/ATen/ops/max_unpool2d_ops.h \
 /usr/include/ATen/ops/max_unpool3d.h \
 /usr/include/ATen/ops/max_unpool3d_ops.h /usr/include/ATen/ops/maximum.h \
 /usr/include/ATen/ops/mean.h /usr/include/ATen/ops/median.h \
 /usr/include/ATen/ops/meshgrid.h /usr/include/ATen/ops/meshgrid_ops.h \
 /usr/include/ATen/ops/min.h /usr/include/ATen/ops/minimum.h \
 /usr/include/ATen/ops/miopen_batch_norm.h \
 /usr/include/ATen/ops/miopen_batch_norm_ops.h \
 /usr/include/ATen/ops/miopen_batch_norm_backward.h \
 /usr/include/ATen/ops/miopen_batch_norm_backward_ops.h \
 /usr/include/ATen/ops/miopen_convolution.h \
 /usr/include/ATen/ops/miopen_convolution_ops.h \
 /usr/include/ATen/ops/miopen_convolution_add_relu.h \
 /usr/include/ATen/ops/miopen_convolution_add_relu_ops.h \
 /usr/include/ATen/ops/miopen_convolution_relu.h \
 /usr/include/ATen/ops/miopen_convolution_relu_ops.h \
 /usr/include/ATen/ops/miopen_convolution_transpose.h \
 /usr/include/ATen/ops/miopen_convolution_transpose_ops.h \
 /usr/include/ATen/ops/miopen_depthwise_convolution.h \
 /usr/include/ATen/ops/miopen_depthwise_convolution_ops.h \
 /usr/include/ATen/ops/miopen_rnn.h \
 /usr/include/ATen/ops/miopen_rnn_ops.h \
 /usr/include/ATen/ops/miopen_rnn_backward.h \
 /usr/include/ATen/ops/miopen_rnn_backward_ops.h \
 /usr/include/ATen/ops/mish.h /usr/include/ATen/ops/mish_ops.h \
 /usr/include/ATen/ops/mish_backward.h \
 /usr/include/ATen/ops/mish_backward_ops.h \
 /usr/include/ATen/ops/mkldnn_adaptive_avg_pool2d.h \
 /usr/include/ATen/ops/mkldnn_adaptive_avg_pool2d_ops.h \
 /usr/include/ATen/ops/mkldnn_adaptive_avg_pool2d_backward.h \
 /usr/include/ATen/ops/mkldnn_adaptive_avg_pool2d_backward_ops.h \
 /usr/include/ATen/ops/mkldnn_convolution.h \
 /usr/include/ATen/ops/mkldnn_convolution_ops.h \
 /usr/include/ATen/ops/mkldnn_linear.h \
 /usr/include/ATen/ops/mkldnn_linear_ops.h \
 /usr/include/ATen/ops/mkldnn_linear_backward.h \
 /usr/include/ATen/ops/mkldnn_linear_backward_ops.h \
 /usr/include/ATen/ops/mkldnn_linear_backward_input.h \
 /usr/include/ATen/ops/mkldnn_linear_backward_input_ops.h \
 /usr/include/ATen/ops/mkldnn_linear_backward_weights.h \
 /usr/include/ATen/ops/mkldnn_linear_backward_weights_ops.h \
 /usr/include/ATen/ops/mkldnn_max_pool2d.h \
 /usr/include/ATen/ops/mkldnn_max_pool2d_ops.h \
 /usr/include/ATen/ops/mkldnn_max_pool2d_backward.h \
 /usr/include/ATen/ops/mkldnn_max_pool2d_backward_ops.h \
 /usr/include/ATen/ops/mkldnn_max_pool3d.h \
 /usr/include/ATen/ops/mkldnn_max_pool3d_ops.h \
 /usr/include/ATen/ops/mkldnn_max_pool3d_backward.h \
 /usr/include/ATen/ops/mkldnn_max_pool3d_backward_ops.h \
 /usr/include/ATen/ops/mkldnn_reorder_conv2d_weight.h \
 /usr/include/ATen/ops/mkldnn_reorder_conv2d_weight_ops.h \
 /usr/include/ATen/ops/mkldnn_reorder_conv3d_weight.h \
 /usr/include/ATen/ops/mkldnn_reorder_conv3d_weight_ops.h \
 /usr/include/ATen/ops/mm.h /usr/include/ATen/ops/mode.h \
 /usr/include/ATen/ops/moveaxis.h /usr/include/ATen/ops/movedim.h \
 /usr/include/ATen/ops/mps_convolution_backward.h \
 /usr/include/ATen/ops/mps_convolution_backward_ops.h \
 /usr/include/ATen/ops/mps_convolution_transpose_backward.h \
 /usr/include/ATen/ops/mps_convolution_transpose_backward_ops.h \
 /usr/include/ATen/ops/mps_max_pool2d_backward.h \
 /usr/include/ATen/ops/mps_max_pool2d_backward_ops.h \
 /usr/include/ATen/ops/mse_loss.h /usr/include/ATen/ops/mse_loss_ops.h \
 /usr/include/ATen/ops/mse_loss_backward.h \
 /usr/include/ATen/ops/mse_loss_backward_ops.h \
 /usr/include/ATen/ops/msort.h /usr/include/ATen/ops/mul.h \
 /usr/include/ATen/ops/multi_margin_loss.h \
 /usr/include/ATen/ops/multi_margin_loss_ops.h \
 /usr/include/ATen/ops/multi_margin_loss_backward.h \
 /usr/include/ATen/ops/multi_margin_loss_backward_ops.h \
 /usr/include/ATen/ops/multilabel_margin_loss.h \
 /usr/include/ATen/ops/multilabel_margin_loss_ops.h \
 /usr/include/ATen/ops/multilabel_margin_loss_backward.h \
 /usr/include/ATen/ops/multilabel_margin_loss_backward_ops.h \
 /usr/include/ATen/ops/multilabel_margin_loss_forward.h \
 /usr/include/ATen/ops/multilabel_margin_loss_forward_ops.h \
 /usr/include/ATen/ops/multinomial.h /usr/include/ATen/ops/multiply.h \
 /usr/include/ATen/ops/mv.h /usr/include/ATen/ops/mvlgamma.h \
 /usr/include/ATen/ops/nan_to_num.h /usr/include/ATen/ops/nanmean.h \
 /usr/include/ATen/ops/nanmedian.h /usr/include/ATen/ops/nanquantile.h \
 /usr/include/ATen/ops/nansum.h /usr/include/ATen/ops/narrow.h \
 /usr/include/ATen/ops/narrow_copy.h \
 /usr/include/ATen/ops/native_batch_norm.h \
 /usr/include/ATen/ops/native_batch_norm_ops.h \
 /usr/include/ATen/ops/native_batch_norm_backward.h \
 /usr/include/ATen/ops/native_batch_norm_backward_ops.h \
 /usr/include/ATen/ops/native_channel_shuffle.h \
 /usr/include/ATen/ops/native_channel_shuffle_ops.h \
 /usr/include/ATen/ops/native_dropout.h \
 /usr/include/ATen/ops/native_dropout_ops.h \
 /usr/include/ATen/ops/native_dropout_backward.h \
 /usr/include/ATen/ops/native_dropout_backward_ops.h \
 /usr/include/ATen/ops/native_group_norm.h \
 /usr/include/ATen/ops/native_group_norm_ops.h \
 /usr/include/ATen/ops/native_group_norm_backward.h \
 /usr/include/ATen/ops/native_group_norm_backward_ops.h \
 /usr/include/ATen/ops/native_layer_norm.h \
 /usr/include/ATen/ops/native_layer_norm_ops.h \
 /usr/include/ATen/ops/native_layer_norm_backward.h \
 /usr/include/ATen/ops/native_layer_norm_backward_ops.h \
 /usr/include/ATen/ops/native_norm.h \
 /usr/include/ATen/ops/native_norm_ops.h /usr/include/ATen/ops/ne.h \
 /usr/include/ATen/ops/neg.h /usr/include/ATen/ops/negative.h \
 /usr/include/ATen/ops/nested_to_padded_tensor.h \
 /usr/include/ATen/ops/nested_to_padded_tensor_ops.h \
 /usr/include/ATen/ops/new_empty.h \
 /usr/include/ATen/ops/new_empty_strided.h \
 /usr/include/ATen/ops/new_full.h /usr/include/ATen/ops/new_ones.h \
 /usr/include/ATen/ops/new_zeros.h /usr/include/ATen/ops/nextafter.h \
 /usr/include/ATen/ops/nll_loss.h /usr/include/ATen/ops/nll_loss_ops.h \
 /usr/include/ATen/ops/nll_loss2d.h \
 /usr/include/ATen/ops/nll_loss2d_ops.h \
 /usr/include/ATen/ops/nll_loss2d_backward.h \
 /usr/include/ATen/ops/nll_loss2d_backward_ops.h \
 /usr/include/ATen/ops/nll_loss2d_forward.h \
 /usr/include/ATen/ops/nll_loss2d_forward_ops.h \
 /usr/include/ATen/ops/nll_loss_backward.h \
 /usr/include/ATen/ops/nll_loss_backward_ops.h \
 /usr/include/ATen/ops/nll_loss_forward.h \
 /usr/include/ATen/ops/nll_loss_forward_ops.h \
 /usr/include/ATen/ops/nll_loss_nd.h \
 /usr/include/ATen/ops/nll_loss_nd_ops.h /usr/include/ATen/ops/nonzero.h \
 /usr/include/ATen/ops/nonzero_numpy.h /usr/include/ATen/ops/norm.h \
 /usr/include/ATen/ops/norm_except_dim.h \
 /usr/include/ATen/ops/norm_except_dim_ops.h \
 /usr/include/ATen/ops/normal.h /usr/include/ATen/ops/not_equal.h \
 /usr/include/ATen/ops/nuclear_norm.h \
 /usr/include/ATen/ops/nuclear_norm_ops.h /usr/include/ATen/ops/numpy_T.h \
 /usr/include/ATen/ops/one_hot.h /usr/include/ATen/ops/one_hot_ops.h \
 /usr/include/ATen/ops/ones.h /usr/include/ATen/ops/ones_ops.h \
 /usr/include/ATen/ops/ones_like.h /usr/include/ATen/ops/ones_like_ops.h \
 /usr/include/ATen/ops/or.h /usr/include/ATen/ops/orgqr.h \
 /usr/include/ATen/ops/ormqr.h /usr/include/ATen/ops/outer.h \
 /usr/include/ATen/ops/output_nr.h /usr/include/ATen/ops/pad.h \
 /usr/include/ATen/ops/pad_ops.h /usr/include/ATen/ops/pad_sequence.h \
 /usr/include/ATen/ops/pad_sequence_ops.h \
 /usr/include/ATen/ops/pairwise_distance.h \
 /usr/include/ATen/ops/pairwise_distance_ops.h \
 /usr/include/ATen/ops/pdist.h /usr/include/ATen/ops/pdist_ops.h \
 /usr/include/ATen/ops/permute.h /usr/include/ATen/ops/permute_copy.h \
 /usr/include/ATen/ops/permute_copy_ops.h \
 /usr/include/ATen/ops/pin_memory.h /usr/include/ATen/ops/pinverse.h \
 /usr/include/ATen/ops/pixel_shuffle.h \
 /usr/include/ATen/ops/pixel_shuffle_ops.h \
 /usr/include/ATen/ops/pixel_unshuffle.h \
 /usr/include/ATen/ops/pixel_unshuffle_ops.h \
 /usr/include/ATen/ops/poisson.h /usr/include/ATen/ops/poisson_ops.h \
 /usr/include/ATen/ops/poisson_nll_loss.h \
 /usr/include/ATen/ops/poisson_nll_loss_ops.h \
 /usr/include/ATen/ops/polar.h /usr/include/ATen/ops/polar_ops.h \
 /usr/include/ATen/ops/polygamma.h /usr/include/ATen/ops/positive.h \
 /usr/include/ATen/ops/pow.h /usr/include/ATen/ops/prelu.h \
 /usr/include/ATen/ops/prelu_backward.h /usr/include/ATen/ops/prod.h \
 /usr/include/ATen/ops/promote_types.h \
 /usr/include/ATen/ops/promote_types_ops.h /usr/include/ATen/ops/put.h \
 /usr/include/ATen/ops/q_per_channel_axis.h \
 /usr/include/ATen/ops/q_per_channel_scales.h \
 /usr/include/ATen/ops/q_per_channel_zero_points.h \
 /usr/include/ATen/ops/q_scale.h /usr/include/ATen/ops/q_zero_point.h \
 /usr/include/ATen/ops/qr.h /usr/include/ATen/ops/qscheme.h \
 /usr/include/ATen/ops/quantile.h \
 /usr/include/ATen/ops/quantize_per_channel.h \
 /usr/include/ATen/ops/quantize_per_channel_ops.h \
 /usr/include/ATen/ops/quantize_per_tensor.h \
 /usr/include/ATen/ops/quantize_per_tensor_ops.h \
 /usr/include/ATen/ops/quantize_per_tensor_dynamic.h \
 /usr/include/ATen/ops/quantize_per_tensor_dynamic_ops.h \
 /usr/include/ATen/ops/quantized_batch_norm.h \
 /usr/include/ATen/ops/quantized_batch_norm_ops.h \
 /usr/include/ATen/ops/quantized_gru_cell.h \
 /usr/include/ATen/ops/quantized_gru_cell_ops.h \
 /usr/include/ATen/ops/quantized_lstm_cell.h \
 /usr/include/ATen/ops/quantized_lstm_cell_ops.h \
 /usr/include/ATen/ops/quantized_max_pool1d.h \
 /usr/include/ATen/ops/quantized_max_pool1d_ops.h \
 /usr/include/ATen/ops/quantized_max_pool2d.h \
 /usr/include/ATen/ops/quantized_max_pool2d_ops.h \
 /usr/include/ATen/ops/quantized_rnn_relu_cell.h \
 /usr/include/ATen/ops/quantized_rnn_relu_cell_ops.h \
 /usr/include/ATen/ops/quantized_rnn_tanh_cell.h \
 /usr/include/ATen/ops/quantized_rnn_tanh_cell_ops.h \
 /usr/include/ATen/ops/rad2deg.h /usr/include/ATen/ops/rand.h \
 /usr/include/ATen/ops/rand_ops.h /usr/include/ATen/ops/rand_like.h \
 /usr/include/ATen/ops/rand_like_ops.h /usr/include/ATen/ops/randint.h \
 /usr/include/ATen/ops/randint_ops.h /usr/include/ATen/ops/randint_like.h \
 /usr/include/ATen/ops/randint_like_ops.h /usr/include/ATen/ops/randn.h \
 /usr/include/ATen/ops/randn_ops.h /usr/include/ATen/ops/randn_like.h \
 /usr/include/ATen/ops/randn_like_ops.h /usr/include/ATen/ops/random.h \
 /usr/include/ATen/ops/randperm.h /usr/include/ATen/ops/randperm_ops.h \
 /usr/include/ATen/ops/range.h /usr/include/ATen/ops/range_ops.h \
 /usr/include/ATen/ops/ravel.h /usr/include/ATen/ops/real.h \
 /usr/include/ATen/ops/real_ops.h /usr/include/ATen/ops/reciprocal.h \
 /usr/include/ATen/ops/record_stream.h \
 /usr/include/ATen/ops/refine_names.h \
 /usr/include/ATen/ops/reflection_pad1d.h \
 /usr/include/ATen/ops/reflection_pad1d_ops.h \
 /usr/include/ATen/ops/reflection_pad1d_backward.h \
 /usr/include/ATen/ops/reflection_pad1d_backward_ops.h \
 /usr/include/ATen/ops/reflection_pad2d.h \
 /usr/include/ATen/ops/reflection_pad2d_ops.h \
 /usr/include/ATen/ops/reflection_pad2d_backward.h \
 /usr/include/ATen/ops/reflection_pad2d_backward_ops.h \
 /usr/include/ATen/ops/reflection_pad3d.h \
 /usr/include/ATen/ops/reflection_pad3d_ops.h \
 /usr/include/ATen/ops/reflection_pad3d_backward.h \
 /usr/include/ATen/ops/reflection_pad3d_backward_ops.h \
 /usr/include/ATen/ops/relu.h /usr/include/ATen/ops/relu6.h \
 /usr/include/ATen/ops/relu6_ops.h /usr/include/ATen/ops/remainder.h \
 /usr/include/ATen/ops/rename.h /usr/include/ATen/ops/renorm.h \
 /usr/include/ATen/ops/repeat.h /usr/include/ATen/ops/repeat_interleave.h \
 /usr/include/ATen/ops/replication_pad1d.h \
 /usr/include/ATen/ops/replication_pad1d_ops.h \
 /usr/include/ATen/ops/replication_pad1d_backward.h \
 /usr/include/ATen/ops/replication_pad1d_backward_ops.h \
 /usr/include/ATen/ops/replication_pad2d.h \
 /usr/include/ATen/ops/replication_pad2d_ops.h \
 /usr/include/ATen/ops/replication_pad2d_backward.h \
 /usr/include/ATen/ops/replication_pad2d_backward_ops.h \
 /usr/include/ATen/ops/replication_pad3d.h \
 /usr/include/ATen/ops/replication_pad3d_ops.h \
 /usr/include/ATen/ops/replication_pad3d_backward.h \
 /usr/include/ATen/ops/replication_pad3d_backward_ops.h \
 /usr/include/ATen/ops/requires_grad.h /usr/include/ATen/ops/reshape.h \
 /usr/include/ATen/ops/reshape_as.h /usr/include/ATen/ops/resize.h \
 /usr/include/ATen/ops/resize_as.h \
 /usr/include/ATen/ops/resize_as_sparse.h \
 /usr/include/ATen/ops/resolve_conj.h /usr/include/ATen/ops/resolve_neg.h \
 /usr/include/ATen/ops/result_type.h \
 /usr/include/ATen/ops/result_type_ops.h \
 /usr/include/ATen/ops/retain_grad.h /usr/include/ATen/ops/retains_grad.h \
 /usr/include/ATen/ops/rnn_relu.h /usr/include/ATen/ops/rnn_relu_ops.h \
 /usr/include/ATen/ops/rnn_relu_cell.h \
 /usr/include/ATen/ops/rnn_relu_cell_ops.h \
 /usr/include/ATen/ops/rnn_tanh.h /usr/include/ATen/ops/rnn_tanh_ops.h \
 /usr/include/ATen/ops/rnn_tanh_cell.h \
 /usr/include/ATen/ops/rnn_tanh_cell_ops.h /usr/include/ATen/ops/roll.h \
 /usr/include/ATen/ops/rot90.h /usr/include/ATen/ops/round.h \
 /usr/include/ATen/ops/row_indices.h \
 /usr/include/ATen/ops/row_indices_copy.h \
 /usr/include/ATen/ops/row_indices_copy_ops.h \
 /usr/include/ATen/ops/row_stack.h /usr/include/ATen/ops/row_stack_ops.h \
 /usr/include/ATen/ops/rrelu.h /usr/include/ATen/ops/rrelu_ops.h \
 /usr/include/ATen/ops/rrelu_with_noise.h \
 /usr/include/ATen/ops/rrelu_with_noise_ops.h \
 /usr/include/ATen/ops/rrelu_with_noise_backward.h \
 /usr/include/ATen/ops/rrelu_with_noise_backward_ops.h \
 /usr/include/ATen/ops/rshift.h /usr/include/ATen/ops/rsqrt.h \
 /usr/include/ATen/ops/rsub.h /usr/include/ATen/ops/rsub_ops.h \
 /usr/include/ATen/ops/scalar_tensor.h \
 /usr/include/ATen/ops/scalar_tensor_ops.h \
 /usr/include/ATen/ops/scatter.h /usr/include/ATen/ops/scatter_add.h \
 /usr/include/ATen/ops/scatter_reduce.h \
 /usr/include/ATen/ops/searchsorted.h \
 /usr/include/ATen/ops/searchsorted_ops.h \
 /usr/include/ATen/ops/segment_reduce.h \
 /usr/include/ATen/ops/segment_reduce_ops.h \
 /usr/include/ATen/ops/select.h /usr/include/ATen/ops/select_backward.h \
 /usr/include/ATen/ops/select_backward_ops.h \
 /usr/include/ATen/ops/select_copy.h \
 /usr/include/ATen/ops/select_copy_ops.h \
 /usr/include/ATen/ops/select_scatter.h /usr/include/ATen/ops/selu.h \
 /usr/include/ATen/ops/selu_ops.h /usr/include/ATen/ops/set.h \
 /usr/include/ATen/ops/set_data.h /usr/include/ATen/ops/sgn.h \
 /usr/include/ATen/ops/sigmoid.h /usr/include/ATen/ops/sigmoid_backward.h \
 /usr/include/ATen/ops/sigmoid_backward_ops.h \
 /usr/include/ATen/ops/sign.h /usr/include/ATen/ops/signbit.h \
 /usr/include/ATen/ops/silu.h /usr/include/ATen/ops/silu_ops.h \
 /usr/include/ATen/ops/silu_backward.h \
 /usr/include/ATen/ops/silu_backward_ops.h /usr/include/ATen/ops/sin.h \
 /usr/include/ATen/ops/sinc.h /usr/include/ATen/ops/sinh.h \
 /usr/include/ATen/ops/size.h /usr/include/ATen/ops/slice.h \
 /usr/include/ATen/ops/slice_backward.h \
 /usr/include/ATen/ops/slice_backward_ops.h \
 /usr/include/ATen/ops/slice_copy.h \
 /usr/include/ATen/ops/slice_copy_ops.h \
 /usr/include/ATen/ops/slice_scatter.h /usr/include/ATen/ops/slogdet.h \
 /usr/include/ATen/ops/slow_conv3d.h \
 /usr/include/ATen/ops/slow_conv3d_ops.h \
 /usr/include/ATen/ops/slow_conv3d_forward.h \
 /usr/include/ATen/ops/slow_conv3d_forward_ops.h \
 /usr/include/ATen/ops/slow_conv_dilated2d.h \
 /usr/include/ATen/ops/slow_conv_dilated2d_ops.h \
 /usr/include/ATen/ops/slow_conv_dilated3d.h \
 /usr/include/ATen/ops/slow_conv_dilated3d_ops.h \
 /usr/include/ATen/ops/slow_conv_transpose2d.h \
 /usr/include/ATen/ops/slow_conv_transpose2d_ops.h \
 /usr/include/ATen/ops/slow_conv_transpose3d.h \
 /usr/include/ATen/ops/slow_conv_transpose3d_ops.h \
 /usr/include/ATen/ops/smm.h /usr/include/ATen/ops/smooth_l1_loss.h \
 /usr/include/ATen/ops/smooth_l1_loss_ops.h \
 /usr/include/ATen/ops/smooth_l1_loss_backward.h \
 /usr/include/ATen/ops/smooth_l1_loss_backward_ops.h \
 /usr/include/ATen/ops/soft_margin_loss.h \
 /usr/include/ATen/ops/soft_margin_loss_ops.h \
 /usr/include/ATen/ops/soft_margin_loss_backward.h \
 /usr/include/ATen/ops/soft_margin_loss_backward_ops.h \
 /usr/include/ATen/ops/softmax.h /usr/include/ATen/ops/softplus.h \
 /usr/include/ATen/ops/softplus_ops.h \
 /usr/include/ATen/ops/softplus_backward.h \
 /usr/include/ATen/ops/softplus_backward_ops.h \
 /usr/include/ATen/ops/softshrink.h \
 /usr/include/ATen/ops/softshrink_ops.h \
 /usr/include/ATen/ops/softshrink_backward.h \
 /usr/include/ATen/ops/softshrink_backward_ops.h \
 /usr/include/ATen/ops/sort.h /usr/include/ATen/ops/sparse_bsc_tensor.h \
 /usr/include/ATen/ops/sparse_bsc_tensor_ops.h \
 /usr/include/ATen/ops/sparse_bsr_tensor.h \
 /usr/include/ATen/ops/sparse_bsr_tensor_ops.h \
 /usr/include/ATen/ops/sparse_compressed_tensor.h \
 /usr/include/ATen/ops/sparse_compressed_tensor_ops.h \
 /usr/include/ATen/ops/sparse_coo_tensor.h \
 /usr/include/ATen/ops/sparse_coo_tensor_ops.h \
 /usr/include/ATen/ops/sparse_csc_tensor.h \
 /usr/include/ATen/ops/sparse_csc_tensor_ops.h \
 /usr/include/ATen/ops/sparse_csr_tensor.h \
 /usr/include/ATen/ops/sparse_csr_tensor_ops.h \
 /usr/include/ATen/ops/sparse_dim.h /usr/include/ATen/ops/sparse_mask.h \
 /usr/include/ATen/ops/sparse_resize.h \
 /usr/include/ATen/ops/sparse_resize_and_clear.h \
 /usr/include/ATen/ops/sparse_sampled_addmm.h \
 /usr/include/ATen/ops/sparse_sampled_addmm_ops.h \
 /usr/include/ATen/ops/special_airy_ai.h \
 /usr/include/ATen/ops/special_airy_ai_ops.h \
 /usr/include/ATen/ops/special_bessel_j0.h \
 /usr/include/ATen/ops/special_bessel_j0_ops.h \
 /usr/include/ATen/ops/special_bessel_j1.h \
 /usr/include/ATen/ops/special_bessel_j1_ops.h \
 /usr/include/ATen/ops/special_bessel_y0.h \
 /usr/include/ATen/ops/special_bessel_y0_ops.h \
 /usr/include/ATen/ops/special_bessel_y1.h \
 /usr/include/ATen/ops/special_bessel_y1_ops.h \
 /usr/include/ATen/ops/special_chebyshev_polynomial_t.h \
 /usr/include/ATen/ops/special_chebyshev_polynomial_t_ops.h \
 /usr/include/ATen/ops/special_chebyshev_polynomial_u.h \
 /usr/include/ATen/ops/special_chebyshev_polynomial_u_ops.h \
 /usr/include/ATen/ops/special_chebyshev_polynomial_v.h \
 /usr/include/ATen/ops/special_chebyshev_polynomial_v_ops.h \
 /usr/include/ATen/ops/special_chebyshev_polynomial_w.h \
 /usr/include/ATen/ops/special_chebyshev_polynomial_w_ops.h \
 /usr/include/ATen/ops/special_digamma.h \
 /usr/include/ATen/ops/special_digamma_ops.h \
 /usr/include/ATen/ops/special_entr.h \
 /usr/include/ATen/ops/special_entr_ops.h \
 /usr/include/ATen/ops/special_erf.h \
 /usr/include/ATen/ops/special_erf_ops.h \
 /usr/include/ATen/ops/special_erfc.h \
 /usr/include/ATen/ops/special_erfc_ops.h \
 /usr/include/ATen/ops/special_erfcx.h \
 /usr/include/ATen/ops/special_erfcx_ops.h \
 /usr/include/ATen/ops/special_erfinv.h \
 /usr/include/ATen/ops/special_erfinv_ops.h \
 /usr/include/ATen/ops/special_exp2.h \
 /usr/include/ATen/ops/special_exp2_ops.h \
 /usr/include/ATen/ops/special_expit.h \
 /usr/include/ATen/ops/special_expit_ops.h \
 /usr/include/ATen/ops/special_expm1.h \
 /usr/include/ATen/ops/special_expm1_ops.h \
 /usr/include/ATen/ops/special_gammainc.h \
 /usr/include/ATen/ops/special_gammainc_ops.h \
 /usr/include/ATen/ops/special_gammaincc.h \
 /usr/include/ATen/ops/special_gammaincc_ops.h \
 /usr/include/ATen/ops/special_gammaln.h \
 /usr/include/ATen/ops/special_gammaln_ops.h \
 /usr/include/ATen/ops/special_hermite_polynomial_h.h \
 /usr/include/ATen/ops/special_hermite_polynomial_h_ops.h \
 /usr/include/ATen/ops/special_hermite_polynomial_he.h \
 /usr/include/ATen/ops/special_hermite_polynomial_he_ops.h \
 /usr/include/ATen/ops/special_i0.h \
 /usr/include/ATen/ops/special_i0_ops.h \
 /usr/include/ATen/ops/special_i0e.h \
 /usr/include/ATen/ops/special_i0e_ops.h \
 /usr/include/ATen/ops/special_i1.h \
 /usr/include/ATen/ops/special_i1_ops.h \
 /usr/include/ATen/ops/special_i1e.h \
 /usr/include/ATen/ops/special_i1e_ops.h \
 /usr/include/ATen/ops/special_laguerre_polynomial_l.h \
 /usr/include/ATen/ops/special_laguerre_polynomial_l_ops.h \
 /usr/include/ATen/ops/special_legendre_polynomial_p.h \
 /usr/include/ATen/ops/special_legendre_polynomial_p_ops.h \
 /usr/include/ATen/ops/special_log1p.h \
 /usr/include/ATen/ops/special_log1p_ops.h \
 /usr/include/ATen/ops/special_log_ndtr.h \
 /usr/include/ATen/ops/special_log_ndtr_ops.h \
 /usr/include/ATen/ops/special_log_softmax.h \
 /usr/include/ATen/ops/special_log_softmax_ops.h \
 /usr/include/ATen/ops/special_logit.h \
 /usr/include/ATen/ops/special_logit_ops.h \
 /usr/include/ATen/ops/special_logsumexp.h \
 /usr/include/ATen/ops/special_logsumexp_ops.h \
 /usr/include/ATen/ops/special_modified_bessel_i0.h \
 /usr/include/ATen/ops/special_modified_bessel_i0_ops.h \
 /usr/include/ATen/ops/special_modified_bessel_i1.h \
 /usr/include/ATen/ops/special_modified_bessel_i1_ops.h \
 /usr/include/ATen/ops/special_modified_bessel_k0.h \
 /usr/include/ATen/ops/special_modified_bessel_k0_ops.h \
 /usr/include/ATen/ops/special_modified_bessel_k1.h \
 /usr/include/ATen/ops/special_modified_bessel_k1_ops.h \
 /usr/include/ATen/ops/special_multigammaln.h \
 /usr/include/ATen/ops/special_multigammaln_ops.h \
 /usr/include/ATen/ops/special_ndtr.h \
 /usr/include/ATen/ops/special_ndtr_ops.h \
 /usr/include/ATen/ops/special_ndtri.h \
 /usr/include/ATen/ops/special_ndtri_ops.h \
 /usr/include/ATen/ops/special_polygamma.h \
 /usr/include/ATen/ops/special_polygamma_ops.h \
 /usr/include/ATen/ops/special_psi.h \
 /usr/include/ATen/ops/special_psi_ops.h \
 /usr/include/ATen/ops/special_round.h \
 /usr/include/ATen/ops/special_round_ops.h \
 /usr/include/ATen/ops/special_scaled_modified_bessel_k0.h \
 /usr/include/ATen/ops/special_scaled_modified_bessel_k0_ops.h \
 /usr/include/ATen/ops/special_scaled_modified_bessel_k1.h \
 /usr/include/ATen/ops/special_scaled_modified_bessel_k1_ops.h \
 /usr/include/ATen/ops/special_shifted_chebyshev_polynomial_t.h \
 /usr/include/ATen/ops/special_shifted_chebyshev_polynomial_t_ops.h \
 /usr/include/ATen/ops/special_shifted_chebyshev_polynomial_u.h \
 /usr/include/ATen/ops/special_shifted_chebyshev_polynomial_u_ops.h \
 /usr/include/ATen/ops/special_shifted_chebyshev_polynomial_v.h \
 /usr/include/ATen/ops/special_shifted_chebyshev_polynomial_v_ops.h \
 /usr/include/ATen/ops/special_shifted_chebyshev_polynomial_w.h \
 /usr/include/ATen/ops/special_shifted_chebyshev_polynomial_w_ops.h \
 /usr/include/ATen/ops/special_sinc.h \
 /usr/include/ATen/ops/special_sinc_ops.h \
 /usr/include/ATen/ops/special_softmax.h \
 /usr/include/ATen/ops/special_softmax_ops.h \
 /usr/include/ATen/ops/special_spherical_bessel_j0.h \
 /usr/include/ATen/ops/special_spherical_bessel_j0_ops.h \
 /usr/include/ATen/ops/special_xlog1py.h \
 /usr/include/ATen/ops/special_xlog1py_ops.h \
 /usr/include/ATen/ops/special_xlogy.h \
 /usr/include/ATen/ops/special_xlogy_ops.h \
 /usr/include/ATen/ops/special_zeta.h \
 /usr/include/ATen/ops/special_zeta_ops.h /usr/include/ATen/ops/split.h \
 /usr/include/ATen/ops/split_copy.h \
 /usr/include/ATen/ops/split_copy_ops.h \
 /usr/include/ATen/ops/split_with_sizes.h \
 /usr/include/ATen/ops/split_with_sizes_copy.h \
 /usr/include/ATen/ops/split_with_sizes_copy_ops.h \
 /usr/include/ATen/ops/sqrt.h /usr/include/ATen/ops/square.h \
 /usr/include/ATen/ops/squeeze.h /usr/include/ATen/ops/squeeze_copy.h \
 /usr/include/ATen/ops/squeeze_copy_ops.h \
 /usr/include/ATen/ops/sspaddmm.h /usr/include/ATen/ops/stack.h \
 /usr/include/ATen/ops/stack_ops.h /usr/include/ATen/ops/std.h \
 /usr/include/ATen/ops/std_mean.h /usr/include/ATen/ops/std_mean_ops.h \
 /usr/include/ATen/ops/stft.h /usr/include/ATen/ops/stride.h \
 /usr/include/ATen/ops/sub.h /usr/include/ATen/ops/subtract.h \
 /usr/include/ATen/ops/sum.h /usr/include/ATen/ops/sum_to_size.h \
 /usr/include/ATen/ops/svd.h /usr/include/ATen/ops/swapaxes.h \
 /usr/include/ATen/ops/swapdims.h /usr/include/ATen/ops/symeig.h \
 /usr/include/ATen/ops/t.h /usr/include/ATen/ops/t_copy.h \
 /usr/include/ATen/ops/t_copy_ops.h /usr/include/ATen/ops/take.h \
 /usr/include/ATen/ops/take_along_dim.h /usr/include/ATen/ops/tan.h \
 /usr/include/ATen/ops/tanh.h /usr/include/ATen/ops/tanh_backward.h \
 /usr/include/ATen/ops/tanh_backward_ops.h \
 /usr/include/ATen/ops/tensor_split.h /usr/include/ATen/ops/tensordot.h \
 /usr/include/ATen/ops/tensordot_ops.h \
 /usr/include/ATen/ops/thnn_conv2d.h \
 /usr/include/ATen/ops/thnn_conv2d_ops.h \
 /usr/include/ATen/ops/threshold.h /usr/include/ATen/ops/threshold_ops.h \
 /usr/include/ATen/ops/threshold_backward.h \
 /usr/include/ATen/ops/threshold_backward_ops.h \
 /usr/include/ATen/ops/tile.h /usr/include/ATen/ops/to.h \
 /usr/include/ATen/ops/to_dense.h \
 /usr/include/ATen/ops/to_dense_backward.h \
 /usr/include/ATen/ops/to_dense_backward_ops.h \
 /usr/include/ATen/ops/to_mkldnn.h \
 /usr/include/ATen/ops/to_mkldnn_backward.h \
 /usr/include/ATen/ops/to_mkldnn_backward_ops.h \
 /usr/include/ATen/ops/to_padded_tensor.h \
 /usr/include/ATen/ops/to_sparse.h /usr/include/ATen/ops/to_sparse_bsc.h \
 /usr/include/ATen/ops/to_sparse_bsr.h \
 /usr/include/ATen/ops/to_sparse_csc.h \
 /usr/include/ATen/ops/to_sparse_csr.h /usr/include/ATen/ops/topk.h \
 /usr/include/ATen/ops/trace.h /usr/include/ATen/ops/trace_backward.h \
 /usr/include/ATen/ops/trace_backward_ops.h \
 /usr/include/ATen/ops/transpose.h /usr/include/ATen/ops/transpose_copy.h \
 /usr/include/ATen/ops/transpose_copy_ops.h \
 /usr/include/ATen/ops/trapezoid.h /usr/include/ATen/ops/trapezoid_ops.h \
 /usr/include/ATen/ops/trapz.h /usr/include/ATen/ops/trapz_ops.h \
 /usr/include/ATen/ops/triangular_solve.h /usr/include/ATen/ops/tril.h \
 /usr/include/ATen/ops/tril_indices.h \
 /usr/include/ATen/ops/tril_indices_ops.h \
 /usr/include/ATen/ops/triplet_margin_loss.h \
 /usr/include/ATen/ops/triplet_margin_loss_ops.h \
 /usr/include/ATen/ops/triu.h /usr/include/ATen/ops/triu_indices.h \
 /usr/include/ATen/ops/triu_indices_ops.h \
 /usr/include/ATen/ops/true_divide.h /usr/include/ATen/ops/trunc.h \
 /usr/include/ATen/ops/type_as.h /usr/include/ATen/ops/unbind.h \
 /usr/include/ATen/ops/unbind_copy.h \
 /usr/include/ATen/ops/unbind_copy_ops.h \
 /usr/include/ATen/ops/unflatten.h \
 /usr/include/ATen/ops/unflatten_dense_tensors.h \
 /usr/include/ATen/ops/unflatten_dense_tensors_ops.h \
 /usr/include/ATen/ops/unfold.h /usr/include/ATen/ops/unfold_backward.h \
 /usr/include/ATen/ops/unfold_backward_ops.h \
 /usr/include/ATen/ops/unfold_copy.h \
 /usr/include/ATen/ops/unfold_copy_ops.h /usr/include/ATen/ops/uniform.h \
 /usr/include/ATen/ops/unique_consecutive.h \
 /usr/include/ATen/ops/unique_consecutive_ops.h \
 /usr/include/ATen/ops/unique_dim.h \
 /usr/include/ATen/ops/unique_dim_ops.h \
 /usr/include/ATen/ops/unique_dim_consecutive.h \
 /usr/include/ATen/ops/unique_dim_consecutive_ops.h \
 /usr/include/ATen/ops/unsafe_chunk.h \
 /usr/include/ATen/ops/unsafe_split.h \
 /usr/include/ATen/ops/unsafe_split_with_sizes.h \
 /usr/include/ATen/ops/unsqueeze.h /usr/include/ATen/ops/unsqueeze_copy.h \
 /usr/include/ATen/ops/unsqueeze_copy_ops.h \
 /usr/include/ATen/ops/upsample_bicubic2d.h \
 /usr/include/ATen/ops/upsample_bicubic2d_ops.h \
 /usr/include/ATen/ops/upsample_bicubic2d_backward.h \
 /usr/include/ATen/ops/upsample_bicubic2d_backward_ops.h \
 /usr/include/ATen/ops/upsample_bilinear2d.h \
 /usr/include/ATen/ops/upsample_bilinear2d_ops.h \
 /usr/include/ATen/ops/upsample_bilinear2d_backward.h \
 /usr/include/ATen/ops/upsample_bilinear2d_backward_ops.h \
 /usr/include/ATen/ops/upsample_linear1d.h \
 /usr/include/ATen/ops/upsample_linear1d_ops.h \
 /usr/include/ATen/ops/upsample_linear1d_backward.h \
 /usr/include/ATen/ops/upsample_linear1d_backward_ops.h \
 /usr/include/ATen/ops/upsample_nearest1d.h \
 /usr/include/ATen/ops/upsample_nearest1d_ops.h \
 /usr/include/ATen/ops/upsample_nearest1d_backward.h \
 /usr/include/ATen/ops/upsample_nearest1d_backward_ops.h \
 /usr/include/ATen/ops/upsample_nearest2d.h \
 /usr/include/ATen/ops/upsample_nearest2d_ops.h \
 /usr/include/ATen/ops/upsample_nearest2d_backward.h \
 /usr/include/ATen/ops/upsample_nearest2d_backward_ops.h \
 /usr/include/ATen/ops/upsample_nearest3d.h \
 /usr/include/ATen/ops/upsample_nearest3d_ops.h \
 /usr/include/ATen/ops/upsample_nearest3d_backward.h \
 /usr/include/ATen/ops/upsample_nearest3d_backward_ops.h \
 /usr/include/ATen/ops/upsample_trilinear3d.h \
 /usr/include/ATen/ops/upsample_trilinear3d_ops.h \
 /usr/include/ATen/ops/upsample_trilinear3d_backward.h \
 /usr/include/ATen/ops/upsample_trilinear3d_backward_ops.h \
 /usr/include/ATen/ops/value_selecting_reduction_backward.h \
 /usr/include/ATen/ops/value_selecting_reduction_backward_ops.h \
 /usr/include/ATen/ops/values.h /usr/include/ATen/ops/values_copy.h \
 /usr/include/ATen/ops/values_copy_ops.h /usr/include/ATen/ops/vander.h \
 /usr/include/ATen/ops/vander_ops.h /usr/include/ATen/ops/var.h \
 /usr/include/ATen/ops/var_mean.h /usr/include/ATen/ops/var_mean_ops.h \
 /usr/include/ATen/ops/vdot.h /usr/include/ATen/ops/view.h \
 /usr/include/ATen/ops/view_as.h /usr/include/ATen/ops/view_as_complex.h \
 /usr/include/ATen/ops/view_as_complex_ops.h \
 /usr/include/ATen/ops/view_as_complex_copy.h \
 /usr/include/ATen/ops/view_as_complex_copy_ops.h \
 /usr/include/ATen/ops/view_as_real.h \
 /usr/include/ATen/ops/view_as_real_ops.h \
 /usr/include/ATen/ops/view_as_real_copy.h \
 /usr/include/ATen/ops/view_as_real_copy_ops.h \
 /usr/include/ATen/ops/view_copy.h /usr/include/ATen/ops/view_copy_ops.h \
 /usr/include/ATen/ops/vsplit.h /usr/include/ATen/ops/vstack.h \
 /usr/include/ATen/ops/vstack_ops.h /usr/include/ATen/ops/where.h \
 /usr/include/ATen/ops/xlogy.h /usr/include/ATen/ops/xor.h \
 /usr/include/ATen/ops/zero.h /usr/include/ATen/ops/zeros.h \
 /usr/include/ATen/ops/zeros_ops.h /usr/include/ATen/ops/zeros_like.h \
 /usr/include/ATen/ops/zeros_like_ops.h /usr/include/ATen/NamedTensor.h \
 /usr/include/ATen/ScalarOps.h /usr/include/ATen/TensorIndexing.h \
 /usr/include/ATen/ExpandUtils.h /usr/include/ATen/NativeFunctions.h \
 /usr/include/ATen/ops/_adaptive_avg_pool2d_native.h \
 /usr/include/ATen/ops/_adaptive_avg_pool2d_backward_native.h \
 /usr/include/ATen/ops/_adaptive_avg_pool3d_native.h \
 /usr/include/ATen/ops/_adaptive_avg_pool3d_backward_native.h \
 /usr/include/ATen/ops/_add_batch_dim_native.h \
 /usr/include/ATen/ops/_add_relu_native.h \
 /usr/include/ATen/ops/_addmm_activation_native.h \
 /usr/include/ATen/ops/_addmm_activation_meta.h \
 /usr/include/ATen/TensorIterator.h /usr/include/ATen/TensorMeta.h \
 /usr/include/c10/util/strides.h /usr/include/ATen/core/Range.h \
 /usr/include/c10/core/DynamicCast.h /usr/include/c10/util/Load.h \
 /usr/include/c++/12/bitset /usr/include/ATen/ops/_aminmax_native.h \
 /usr/include/ATen/ops/_amp_foreach_non_finite_check_and_unscale_native.h \
 /usr/include/ATen/ops/_amp_update_scale_native.h \
 /usr/include/ATen/ops/_assert_async_native.h \
 /usr/include/ATen/ops/_assert_tensor_metadata_native.h \
 /usr/include/ATen/ops/_autocast_to_full_precision_native.h \
 /usr/include/ATen/ops/_autocast_to_reduced_precision_native.h \
 /usr/include/ATen/ops/_backward_native.h \
 /usr/include/ATen/ops/_batch_norm_impl_index_native.h \
 /usr/include/ATen/ops/_batch_norm_impl_index_backward_native.h \
 /usr/include/ATen/ops/_cast_Byte_native.h \
 /usr/include/ATen/ops/_cast_Char_native.h \
 /usr/include/ATen/ops/_cast_Double_native.h \
 /usr/include/ATen/ops/_cast_Float_native.h \
 /usr/include/ATen/ops/_cast_Half_native.h \
 /usr/include/ATen/ops/_cast_Int_native.h \
 /usr/include/ATen/ops/_cast_Long_native.h \
 /usr/include/ATen/ops/_cast_Short_native.h \
 /usr/include/ATen/ops/_cdist_backward_native.h \
 /usr/include/ATen/ops/_cdist_forward_native.h \
 /usr/include/ATen/ops/_cholesky_solve_helper_native.h \
 /usr/include/ATen/ops/_choose_qparams_per_tensor_native.h \
 /usr/include/ATen/ops/_coalesce_native.h \
 /usr/include/ATen/ops/_coalesced_native.h \
 /usr/include/ATen/ops/_compute_linear_combination_native.h \
 /usr/include/ATen/ops/_conj_native.h \
 /usr/include/ATen/ops/_conj_copy_native.h \
 /usr/include/ATen/ops/_conj_physical_native.h \
 /usr/include/ATen/ops/_conv_depthwise2d_native.h \
 /usr/include/ATen/ops/_convert_indices_from_coo_to_csr_native.h \
 /usr/include/ATen/ops/_convert_indices_from_coo_to_csr_meta.h \
 /usr/include/ATen/ops/_convert_indices_from_csr_to_coo_native.h \
 /usr/include/ATen/ops/_convert_indices_from_csr_to_coo_meta.h \
 /usr/include/ATen/ops/_convolution_native.h \
 /usr/include/ATen/ops/_convolution_double_backward_native.h \
 /usr/include/ATen/ops/_convolution_mode_native.h \
 /usr/include/ATen/ops/_copy_from_native.h \
 /usr/include/ATen/ops/_copy_from_and_resize_native.h \
 /usr/include/ATen/ops/_ctc_loss_native.h \
 /usr/include/ATen/ops/_ctc_loss_backward_native.h \
 /usr/include/ATen/ops/_cudnn_ctc_loss_native.h \
 /usr/include/ATen/ops/_cudnn_init_dropout_state_native.h \
 /usr/include/ATen/ops/_cudnn_rnn_native.h \
 /usr/include/ATen/ops/_cudnn_rnn_backward_native.h \
 /usr/include/ATen/ops/_cudnn_rnn_flatten_weight_native.h \
 /usr/include/ATen/ops/_cufft_clear_plan_cache_native.h \
 /usr/include/ATen/ops/_cufft_get_plan_cache_max_size_native.h \
 /usr/include/ATen/ops/_cufft_get_plan_cache_size_native.h \
 /usr/include/ATen/ops/_cufft_set_plan_cache_max_size_native.h \
 /usr/include/ATen/ops/_cummax_helper_native.h \
 /usr/include/ATen/ops/_cummin_helper_native.h \
 /usr/include/ATen/ops/_debug_has_internal_overlap_native.h \
 /usr/include/ATen/ops/_dimI_native.h \
 /usr/include/ATen/ops/_dimV_native.h \
 /usr/include/ATen/ops/_dim_arange_native.h \
 /usr/include/ATen/ops/_dirichlet_grad_native.h \
 /usr/include/ATen/ops/_efficientzerotensor_native.h \
 /usr/include/ATen/ops/_embedding_bag_native.h \
 /usr/include/ATen/ops/_embedding_bag_backward_native.h \
 /usr/include/ATen/ops/_embedding_bag_dense_backward_native.h \
 /usr/include/ATen/ops/_embedding_bag_forward_only_native.h \
 /usr/include/ATen/ops/_embedding_bag_per_sample_weights_backward_native.h \
 /usr/include/ATen/ops/_embedding_bag_sparse_backward_native.h \
 /usr/include/ATen/ops/_empty_affine_quantized_native.h \
 /usr/include/ATen/ops/_empty_per_channel_affine_quantized_native.h \
 /usr/include/ATen/ops/_euclidean_dist_native.h \
 /usr/include/ATen/ops/_fake_quantize_learnable_per_channel_affine_native.h \
 /usr/include/ATen/ops/_fake_quantize_learnable_per_channel_affine_backward_native.h \
 /usr/include/ATen/ops/_fake_quantize_learnable_per_tensor_affine_native.h \
 /usr/include/ATen/ops/_fake_quantize_learnable_per_tensor_affine_backward_native.h \
 /usr/include/ATen/ops/_fake_quantize_per_tensor_affine_cachemask_tensor_qparams_native.h \
 /usr/include/ATen/ops/_fft_c2c_native.h \
 /usr/include/ATen/ops/_fft_c2r_native.h \
 /usr/include/ATen/ops/_fft_r2c_native.h \
 /usr/include/ATen/ops/_flash_scaled_dot_product_attention_native.h \
 /usr/include/ATen/ops/_foobar_native.h \
 /usr/include/ATen/ops/_foreach_abs_native.h \
 /usr/include/ATen/ops/_foreach_acos_native.h \
 /usr/include/ATen/ops/_foreach_add_native.h \
 /usr/include/ATen/ops/_foreach_addcdiv_native.h \
 /usr/include/ATen/ops/_foreach_addcmul_native.h \
 /usr/include/ATen/ops/_foreach_asin_native.h \
 /usr/include/ATen/ops/_foreach_atan_native.h \
 /usr/include/ATen/ops/_foreach_ceil_native.h \
 /usr/include/ATen/ops/_foreach_cos_native.h \
 /usr/include/ATen/ops/_foreach_cosh_native.h \
 /usr/include/ATen/ops/_foreach_div_native.h \
 /usr/include/ATen/ops/_foreach_erf_native.h \
 /usr/include/ATen/ops/_foreach_erfc_native.h \
 /usr/include/ATen/ops/_foreach_exp_native.h \
 /usr/include/ATen/ops/_foreach_expm1_native.h \
 /usr/include/ATen/ops/_foreach_floor_native.h \
 /usr/include/ATen/ops/_foreach_frac_native.h \
 /usr/include/ATen/ops/_foreach_lgamma_native.h \
 /usr/include/ATen/ops/_foreach_log_native.h \
 /usr/include/ATen/ops/_foreach_log10_native.h \
 /usr/include/ATen/ops/_foreach_log1p_native.h \
 /usr/include/ATen/ops/_foreach_log2_native.h \
 /usr/include/ATen/ops/_foreach_maximum_native.h \
 /usr/include/ATen/ops/_foreach_minimum_native.h \
 /usr/include/ATen/ops/_foreach_mul_native.h \
 /usr/include/ATen/ops/_foreach_neg_native.h \
 /usr/include/ATen/ops/_foreach_norm_native.h \
 /usr/include/ATen/ops/_foreach_reciprocal_native.h \
 /usr/include/ATen/ops/_foreach_round_native.h \
 /usr/include/ATen/ops/_foreach_sigmoid_native.h \
 /usr/include/ATen/ops/_foreach_sin_native.h \
 /usr/include/ATen/ops/_foreach_sinh_native.h \
 /usr/include/ATen/ops/_foreach_sqrt_native.h \
 /usr/include/ATen/ops/_foreach_sub_native.h \
 /usr/include/ATen/ops/_foreach_tan_native.h \
 /usr/include/ATen/ops/_foreach_tanh_native.h \
 /usr/include/ATen/ops/_foreach_trunc_native.h \
 /usr/include/ATen/ops/_foreach_zero_native.h \
 /usr/include/ATen/ops/_fused_adam_native.h \
 /usr/include/ATen/ops/_fused_dropout_native.h \
 /usr/include/ATen/ops/_fused_moving_avg_obs_fq_helper_native.h \
 /usr/include/ATen/ops/_fw_primal_native.h \
 /usr/include/ATen/ops/_fw_primal_copy_native.h \
 /usr/include/ATen/ops/_gather_sparse_backward_native.h \
 /usr/include/ATen/ops/_grid_sampler_2d_cpu_fallback_native.h \
 /usr/include/ATen/ops/_grid_sampler_2d_cpu_fallback_backward_native.h \
 /usr/include/ATen/ops/_has_compatible_shallow_copy_type_native.h \
 /usr/include/ATen/ops/_has_same_storage_numel_native.h \
 /usr/include/ATen/ops/_histogramdd_bin_edges_native.h \
 /usr/include/ATen/ops/_histogramdd_from_bin_cts_native.h \
 /usr/include/ATen/ops/_histogramdd_from_bin_tensors_native.h \
 /usr/include/ATen/ops/_index_put_impl_native.h \
 /usr/include/ATen/ops/_indices_native.h \
 /usr/include/ATen/ops/_indices_copy_native.h \
 /usr/include/ATen/ops/_is_zerotensor_native.h \
 /usr/include/ATen/ops/_linalg_check_errors_native.h \
 /usr/include/ATen/ops/_linalg_det_native.h \
 /usr/include/ATen/ops/_linalg_det_meta.h \
 /usr/include/ATen/ops/_linalg_eigh_native.h \
 /usr/include/ATen/ops/_linalg_eigh_meta.h \
 /usr/include/ATen/ops/_linalg_slogdet_native.h \
 /usr/include/ATen/ops/_linalg_slogdet_meta.h \
 /usr/include/ATen/ops/_linalg_solve_ex_native.h \
 /usr/include/ATen/ops/_linalg_solve_ex_meta.h \
 /usr/include/ATen/ops/_linalg_svd_native.h \
 /usr/include/ATen/ops/_linalg_svd_meta.h \
 /usr/include/ATen/ops/_local_scalar_dense_native.h \
 /usr/include/ATen/ops/_log_softmax_native.h \
 /usr/include/ATen/ops/_log_softmax_meta.h \
 /usr/include/ATen/ops/_log_softmax_backward_data_native.h \
 /usr/include/ATen/ops/_log_softmax_backward_data_meta.h \
 /usr/include/ATen/ops/_logcumsumexp_native.h \
 /usr/include/ATen/ops/_lstm_mps_native.h \
 /usr/include/ATen/ops/_lu_with_info_native.h \
 /usr/include/ATen/ops/_make_dual_native.h \
 /usr/include/ATen/ops/_make_dual_copy_native.h \
 /usr/include/ATen/ops/_make_per_channel_quantized_tensor_native.h \
 /usr/include/ATen/ops/_make_per_tensor_quantized_tensor_native.h \
 /usr/include/ATen/ops/_masked_scale_native.h \
 /usr/include/ATen/ops/_masked_softmax_native.h \
 /usr/include/ATen/ops/_masked_softmax_backward_native.h \
 /usr/include/ATen/ops/_mkldnn_reshape_native.h \
 /usr/include/ATen/ops/_mkldnn_transpose_native.h \
 /usr/include/ATen/ops/_mps_convolution_native.h \
 /usr/include/ATen/ops/_mps_convolution_transpose_native.h \
 /usr/include/ATen/ops/_mps_max_pool2d_native.h \
 /usr/include/ATen/ops/_native_decoder_only_multi_head_attention_native.h \
 /usr/include/ATen/ops/_native_multi_head_attention_native.h \
 /usr/include/ATen/ops/_neg_view_native.h \
 /usr/include/ATen/ops/_neg_view_copy_native.h \
 /usr/include/ATen/ops/_nested_from_padded_native.h \
 /usr/include/ATen/ops/_nested_from_padded_and_nested_example_native.h \
 /usr/include/ATen/ops/_nested_select_backward_native.h \
 /usr/include/ATen/ops/_nested_sum_backward_native.h \
 /usr/include/ATen/ops/_nested_tensor_from_mask_native.h \
 /usr/include/ATen/ops/_nested_tensor_from_mask_left_aligned_native.h \
 /usr/include/ATen/ops/_nested_tensor_from_tensor_list_native.h \
 /usr/include/ATen/ops/_nested_tensor_layer_norm_native.h \
 /usr/include/ATen/ops/_nested_tensor_offsets_native.h \
 /usr/include/ATen/ops/_nested_tensor_size_native.h \
 /usr/include/ATen/ops/_nested_tensor_softmax_with_shape_native.h \
 /usr/include/ATen/ops/_nested_tensor_strides_native.h \
 /usr/include/ATen/ops/_nested_view_from_buffer_native.h \
 /usr/include/ATen/ops/_nested_view_from_buffer_copy_native.h \
 /usr/include/ATen/ops/_new_zeros_with_same_feature_meta_native.h \
 /usr/include/ATen/ops/_nnpack_available_native.h \
 /usr/include/ATen/ops/_nnpack_spatial_convolution_native.h \
 /usr/include/ATen/ops/_nnz_native.h \
 /usr/include/ATen/ops/_pack_padded_sequence_native.h \
 /usr/include/ATen/ops/_pack_padded_sequence_backward_native.h \
 /usr/include/ATen/ops/_pad_circular_native.h \
 /usr/include/ATen/ops/_pad_enum_native.h \
 /usr/include/ATen/ops/_pad_packed_sequence_native.h \
 /usr/include/ATen/ops/_pdist_backward_native.h \
 /usr/include/ATen/ops/_pdist_forward_native.h \
 /usr/include/ATen/ops/_pin_memory_native.h \
 /usr/include/ATen/ops/_remove_batch_dim_native.h \
 /usr/include/ATen/ops/_reshape_alias_native.h \
 /usr/include/ATen/ops/_reshape_alias_copy_native.h \
 /usr/include/ATen/ops/_reshape_from_tensor_native.h \
 /usr/include/ATen/ops/_resize_output_native.h \
 /usr/include/ATen/ops/_rowwise_prune_native.h \
 /usr/include/ATen/ops/_sample_dirichlet_native.h \
 /usr/include/ATen/ops/_saturate_weight_to_fp16_native.h \
 /usr/include/ATen/ops/_scaled_dot_product_attention_native.h \
 /usr/include/ATen/ops/_scaled_dot_product_attention_forward_native.h \
 /usr/include/ATen/ops/_scaled_dot_product_attention_math_native.h \
 /usr/include/ATen/ops/_segment_reduce_backward_native.h \
 /usr/include/ATen/ops/_shape_as_tensor_native.h \
 /usr/include/ATen/ops/_slow_conv2d_backward_native.h \
 /usr/include/ATen/ops/_slow_conv2d_forward_native.h \
 /usr/include/ATen/ops/_sobol_engine_draw_native.h \
 /usr/include/ATen/ops/_sobol_engine_ff_native.h \
 /usr/include/ATen/ops/_sobol_engine_initialize_state_native.h \
 /usr/include/ATen/ops/_sobol_engine_scramble_native.h \
 /usr/include/ATen/ops/_softmax_native.h \
 /usr/include/ATen/ops/_softmax_meta.h \
 /usr/include/ATen/ops/_softmax_backward_data_native.h \
 /usr/include/ATen/ops/_softmax_backward_data_meta.h \
 /usr/include/ATen/ops/_sparse_addmm_native.h \
 /usr/include/ATen/ops/_sparse_broadcast_to_native.h \
 /usr/include/ATen/ops/_sparse_broadcast_to_copy_native.h \
 /usr/include/ATen/ops/_sparse_bsc_tensor_unsafe_native.h \
 /usr/include/ATen/ops/_sparse_bsr_tensor_unsafe_native.h \
 /usr/include/ATen/ops/_sparse_compressed_tensor_unsafe_native.h \
 /usr/include/ATen/ops/_sparse_coo_tensor_unsafe_native.h \
 /usr/include/ATen/ops/_sparse_coo_tensor_with_dims_native.h \
 /usr/include/ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h \
 /usr/include/ATen/ops/_sparse_csc_tensor_unsafe_native.h \
 /usr/include/ATen/ops/_sparse_csr_prod_native.h \
 /usr/include/ATen/ops/_sparse_csr_sum_native.h \
 /usr/include/ATen/ops/_sparse_csr_tensor_unsafe_native.h \
 /usr/include/ATen/ops/_sparse_log_softmax_native.h \
 /usr/include/ATen/ops/_sparse_log_softmax_backward_data_native.h \
 /usr/include/ATen/ops/_sparse_mask_helper_native.h \
 /usr/include/ATen/ops/_sparse_mm_native.h \
 /usr/include/ATen/ops/_sparse_softmax_native.h \
 /usr/include/ATen/ops/_sparse_softmax_backward_data_native.h \
 /usr/include/ATen/ops/_sparse_sparse_matmul_native.h \
 /usr/include/ATen/ops/_sparse_sum_native.h \
 /usr/include/ATen/ops/_sparse_sum_backward_native.h \
 /usr/include/ATen/ops/_spdiags_native.h \
 /usr/include/ATen/ops/_stack_native.h \
 /usr/include/ATen/ops/_standard_gamma_native.h \
 /usr/include/ATen/ops/_standard_gamma_grad_native.h \
 /usr/include/ATen/ops/_symeig_helper_native.h \
 /usr/include/ATen/ops/_test_ambiguous_defaults_native.h \
 /usr/include/ATen/ops/_test_autograd_multiple_dispatch_native.h \
 /usr/include/ATen/ops/_test_autograd_multiple_dispatch_view_native.h \
 /usr/include/ATen/ops/_test_autograd_multiple_dispatch_view_copy_native.h \
 /usr/include/ATen/ops/_test_optional_filled_intlist_native.h \
 /usr/include/ATen/ops/_test_optional_floatlist_native.h \
 /usr/include/ATen/ops/_test_optional_intlist_native.h \
 /usr/include/ATen/ops/_test_serialization_subcmul_native.h \
 /usr/include/ATen/ops/_test_string_default_native.h \
 /usr/include/ATen/ops/_test_warn_in_autograd_native.h \
 /usr/include/ATen/ops/_thnn_differentiable_gru_cell_backward_native.h \
 /usr/include/ATen/ops/_thnn_differentiable_lstm_cell_backward_native.h \
 /usr/include/ATen/ops/_thnn_fused_gru_cell_native.h \
 /usr/include/ATen/ops/_thnn_fused_gru_cell_backward_native.h \
 /usr/include/ATen/ops/_thnn_fused_lstm_cell_native.h \
 /usr/include/ATen/ops/_thnn_fused_lstm_cell_backward_native.h \
 /usr/include/ATen/ops/_thnn_fused_lstm_cell_backward_impl_native.h \
 /usr/include/ATen/ops/_to_copy_native.h \
 /usr/include/ATen/ops/_to_cpu_native.h \
 /usr/include/ATen/ops/_to_dense_native.h \
 /usr/include/ATen/ops/_torch_cuda_cu_linker_symbol_op_native.h \
 /usr/include/ATen/ops/_transform_bias_rescale_qkv_native.h \
 /usr/include/ATen/ops/_transformer_decoder_only_layer_fwd_native.h \
 /usr/include/ATen/ops/_transformer_encoder_layer_fwd_native.h \
 /usr/include/ATen/ops/_trilinear_native.h \
 /usr/include/ATen/ops/_triton_multi_head_attention_native.h \
 /usr/include/ATen/ops/_triton_scaled_dot_attention_native.h \
 /usr/include/ATen/ops/_unique_native.h \
 /usr/include/ATen/ops/_unique2_native.h \
 /usr/include/ATen/ops/_unpack_dual_native.h \
 /usr/include/ATen/ops/_unsafe_view_native.h \
 /usr/include/ATen/ops/_upsample_bicubic2d_aa_native.h \
 /usr/include/ATen/ops/_upsample_bicubic2d_aa_meta.h \
 /usr/include/ATen/ops/_upsample_bicubic2d_aa_backward_native.h \
 /usr/include/ATen/ops/_upsample_bicubic2d_aa_backward_meta.h \
 /usr/include/ATen/ops/_upsample_bilinear2d_aa_native.h \
 /usr/include/ATen/ops/_upsample_bilinear2d_aa_meta.h \
 /usr/include/ATen/ops/_upsample_bilinear2d_aa_backward_native.h \
 /usr/include/ATen/ops/_upsample_bilinear2d_aa_backward_meta.h \
 /usr/include/ATen/ops/_upsample_nearest_exact1d_native.h \
 /usr/include/ATen/ops/_upsample_nearest_exact1d_meta.h \
 /usr/include/ATen/ops/_upsample_nearest_exact1d_backward_native.h \
 /usr/include/ATen/ops/_upsample_nearest_exact1d_backward_meta.h \
 /usr/include/ATen/ops/_upsample_nearest_exact2d_native.h \
 /usr/include/ATen/ops/_upsample_nearest_exact2d_meta.h \
 /usr/include/ATen/ops/_upsample_nearest_exact2d_backward_native.h \
 /usr/include/ATen/ops/_upsample_nearest_exact2d_backward_meta.h \
 /usr/include/ATen/ops/_upsample_nearest_exact3d_native.h \
 /usr/include/ATen/ops/_upsample_nearest_exact3d_meta.h \
 /usr/include/ATen/ops/_upsample_nearest_exact3d_backward_native.h \
 /usr/include/ATen/ops/_upsample_nearest_exact3d_backward_meta.h \
 /usr/include/ATen/ops/_use_cudnn_ctc_loss_native.h \
 /usr/include/ATen/ops/_use_cudnn_rnn_flatten_weight_native.h \
 /usr/include/ATen/ops/_validate_compressed_sparse_indices_native.h \
 /usr/include/ATen/ops/_validate_sparse_bsc_tensor_args_native.h \
 /usr/include/ATen/ops/_validate_sparse_bsr_tensor_args_native.h \
 /usr/include/ATen/ops/_validate_sparse_compressed_tensor_args_native.h \
 /usr/include/ATen/ops/_validate_sparse_coo_tensor_args_native.h \
 /usr/include/ATen/ops/_validate_sparse_csc_tensor_args_native.h \
 /usr/include/ATen/ops/_validate_sparse_csr_tensor_args_native.h \
 /usr/include/ATen/ops/_values_native.h \
 /usr/include/ATen/ops/_values_copy_native.h \
 /usr/include/ATen/ops/_version_native.h \
 /usr/include/ATen/ops/_weight_norm_native.h \
 /usr/include/ATen/ops/_weight_norm_differentiable_backward_native.h \
 /usr/include/ATen/ops/_weight_norm_interface_native.h \
 /usr/include/ATen/ops/_weight_norm_interface_backward_native.h \
 /usr/include/ATen/ops/abs_native.h \
 /usr/include/ATen/ops/absolute_native.h \
 /usr/include/ATen/ops/acos_native.h /usr/include/ATen/ops/acos_meta.h \
 /usr/include/ATen/ops/acosh_native.h /usr/include/ATen/ops/acosh_meta.h \
 /usr/include/ATen/ops/adaptive_avg_pool1d_native.h \
 /usr/include/ATen/ops/adaptive_avg_pool2d_native.h \
 /usr/include/ATen/ops/adaptive_avg_pool3d_native.h \
 /usr/include/ATen/ops/adaptive_avg_pool3d_backward_native.h \
 /usr/include/ATen/ops/adaptive_max_pool1d_native.h \
 /usr/include/ATen/ops/adaptive_max_pool2d_native.h \
 /usr/include/ATen/ops/adaptive_max_pool2d_meta.h \
 /usr/include/ATen/ops/adaptive_max_pool2d_backward_native.h \
 /usr/include/ATen/ops/adaptive_max_pool2d_backward_meta.h \
 /usr/include/ATen/ops/adaptive_max_pool3d_native.h \
 /usr/include/ATen/ops/adaptive_max_pool3d_meta.h \
 /usr/include/ATen/ops/adaptive_max_pool3d_backward_native.h \
 /usr/include/ATen/ops/adaptive_max_pool3d_backward_meta.h \
 /usr/include/ATen/ops/add_native.h /usr/include/ATen/ops/add_meta.h \
 /usr/include/ATen/ops/addbmm_native.h \
 /usr/include/ATen/ops/addcdiv_native.h \
 /usr/include/ATen/ops/addcdiv_meta.h \
 /usr/include/ATen/ops/addcmul_native.h \
 /usr/include/ATen/ops/addcmul_meta.h \
 /usr/include/ATen/ops/addmm_native.h /usr/include/ATen/ops/addmm_meta.h \
 /usr/include/ATen/ops/addmv_native.h /usr/include/ATen/ops/addmv_meta.h \
 /usr/include/ATen/ops/addr_native.h \
 /usr/include/ATen/ops/adjoint_native.h \
 /usr/include/ATen/ops/affine_grid_generator_native.h \
 /usr/include/ATen/ops/affine_grid_generator_backward_native.h \
 /usr/include/ATen/ops/alias_native.h \
 /usr/include/ATen/ops/alias_copy_native.h \
 /usr/include/ATen/ops/align_as_native.h \
 /usr/include/ATen/ops/align_tensors_native.h \
 /usr/include/ATen/ops/align_to_native.h \
 /usr/include/ATen/ops/all_native.h /usr/include/ATen/ops/all_meta.h \
 /usr/include/ATen/ops/allclose_native.h \
 /usr/include/ATen/ops/alpha_dropout_native.h \
 /usr/include/ATen/ops/amax_native.h /usr/include/ATen/ops/amax_meta.h \
 /usr/include/ATen/ops/amin_native.h /usr/include/ATen/ops/amin_meta.h \
 /usr/include/ATen/ops/aminmax_native.h \
 /usr/include/ATen/ops/aminmax_meta.h /usr/include/ATen/ops/and_native.h \
 /usr/include/ATen/ops/angle_native.h /usr/include/ATen/ops/any_native.h \
 /usr/include/ATen/ops/any_meta.h /usr/include/ATen/ops/arange_native.h \
 /usr/include/ATen/ops/arccos_native.h \
 /usr/include/ATen/ops/arccosh_native.h \
 /usr/include/ATen/ops/arcsin_native.h \
 /usr/include/ATen/ops/arcsinh_native.h \
 /usr/include/ATen/ops/arctan_native.h \
 /usr/include/ATen/ops/arctan2_native.h \
 /usr/include/ATen/ops/arctanh_native.h \
 /usr/include/ATen/ops/argmax_native.h \
 /usr/include/ATen/ops/argmax_meta.h \
 /usr/include/ATen/ops/argmin_native.h \
 /usr/include/ATen/ops/argmin_meta.h \
 /usr/include/ATen/ops/argsort_native.h \
 /usr/include/ATen/ops/argwhere_native.h \
 /usr/include/ATen/ops/as_strided_native.h \
 /usr/include/ATen/ops/as_strided_copy_native.h \
 /usr/include/ATen/ops/as_strided_scatter_native.h \
 /usr/include/ATen/ops/asin_native.h /usr/include/ATen/ops/asin_meta.h \
 /usr/include/ATen/ops/asinh_native.h /usr/include/ATen/ops/asinh_meta.h \
 /usr/include/ATen/ops/atan_native.h /usr/include/ATen/ops/atan_meta.h \
 /usr/include/ATen/ops/atan2_native.h /usr/include/ATen/ops/atan2_meta.h \
 /usr/include/ATen/ops/atanh_native.h /usr/include/ATen/ops/atanh_meta.h \
 /usr/include/ATen/ops/atleast_1d_native.h \
 /usr/include/ATen/ops/atleast_2d_native.h \
 /usr/include/ATen/ops/atleast_3d_native.h \
 /usr/include/ATen/ops/avg_pool1d_native.h \
 /usr/include/ATen/ops/avg_pool2d_native.h \
 /usr/include/ATen/ops/avg_pool2d_meta.h \
 /usr/include/ATen/ops/avg_pool2d_backward_native.h \
 /usr/include/ATen/ops/avg_pool2d_backward_meta.h \
 /usr/include/ATen/ops/avg_pool3d_native.h \
 /usr/include/ATen/ops/avg_pool3d_meta.h \
 /usr/include/ATen/ops/avg_pool3d_backward_native.h \
 /usr/include/ATen/ops/avg_pool3d_backward_meta.h \
 /usr/include/ATen/ops/baddbmm_native.h \
 /usr/include/ATen/ops/baddbmm_meta.h \
 /usr/include/ATen/ops/bartlett_window_native.h \
 /usr/include/ATen/ops/batch_norm_native.h \
 /usr/include/ATen/ops/batch_norm_backward_elemt_native.h \
 /usr/include/ATen/ops/batch_norm_backward_reduce_native.h \
 /usr/include/ATen/ops/batch_norm_elemt_native.h \
 /usr/include/ATen/ops/batch_norm_gather_stats_native.h \
 /usr/include/ATen/ops/batch_norm_gather_stats_with_counts_native.h \
 /usr/include/ATen/ops/batch_norm_stats_native.h \
 /usr/include/ATen/ops/batch_norm_update_stats_native.h \
 /usr/include/ATen/ops/bernoulli_native.h \
 /usr/include/ATen/ops/bilinear_native.h \
 /usr/include/ATen/ops/binary_cross_entropy_native.h \
 /usr/include/ATen/ops/binary_cross_entropy_backward_native.h \
 /usr/include/ATen/ops/binary_cross_entropy_with_logits_native.h \
 /usr/include/ATen/ops/bincount_native.h \
 /usr/include/ATen/ops/binomial_native.h \
 /usr/include/ATen/ops/bitwise_and_native.h \
 /usr/include/ATen/ops/bitwise_and_meta.h \
 /usr/include/ATen/ops/bitwise_left_shift_native.h \
 /usr/include/ATen/ops/bitwise_left_shift_meta.h \
 /usr/include/ATen/ops/bitwise_not_native.h \
 /usr/include/ATen/ops/bitwise_not_meta.h \
 /usr/include/ATen/ops/bitwise_or_native.h \
 /usr/include/ATen/ops/bitwise_or_meta.h \
 /usr/include/ATen/ops/bitwise_right_shift_native.h \
 /usr/include/ATen/ops/bitwise_right_shift_meta.h \
 /usr/include/ATen/ops/bitwise_xor_native.h \
 /usr/include/ATen/ops/bitwise_xor_meta.h \
 /usr/include/ATen/ops/blackman_window_native.h \
 /usr/include/ATen/ops/block_diag_native.h \
 /usr/include/ATen/ops/bmm_native.h /usr/include/ATen/ops/bmm_meta.h \
 /usr/include/ATen/ops/broadcast_tensors_native.h \
 /usr/include/ATen/ops/broadcast_to_native.h \
 /usr/include/ATen/ops/bucketize_native.h \
 /usr/include/ATen/ops/can_cast_native.h \
 /usr/include/ATen/ops/cartesian_prod_native.h \
 /usr/include/ATen/ops/cat_native.h /usr/include/ATen/ops/cat_meta.h \
 /usr/include/ATen/ops/cauchy_native.h \
 /usr/include/ATen/ops/ccol_indices_native.h \
 /usr/include/ATen/ops/ccol_indices_copy_native.h \
 /usr/include/ATen/ops/cdist_native.h /usr/include/ATen/ops/ceil_native.h \
 /usr/include/ATen/ops/ceil_meta.h /usr/include/ATen/ops/celu_native.h \
 /usr/include/ATen/ops/chain_matmul_native.h \
 /usr/include/ATen/ops/chalf_native.h \
 /usr/include/ATen/ops/channel_shuffle_native.h \
 /usr/include/ATen/ops/cholesky_native.h \
 /usr/include/ATen/ops/cholesky_inverse_native.h \
 /usr/include/ATen/ops/cholesky_solve_native.h \
 /usr/include/ATen/ops/choose_qparams_optimized_native.h \
 /usr/include/ATen/ops/chunk_native.h \
 /usr/include/ATen/ops/clamp_native.h /usr/include/ATen/ops/clamp_meta.h \
 /usr/include/ATen/ops/clamp_max_native.h \
 /usr/include/ATen/ops/clamp_max_meta.h \
 /usr/include/ATen/ops/clamp_min_native.h \
 /usr/include/ATen/ops/clamp_min_meta.h \
 /usr/include/ATen/ops/clip_native.h /usr/include/ATen/ops/clone_native.h \
 /usr/include/ATen/ops/coalesce_native.h \
 /usr/include/ATen/ops/col2im_native.h \
 /usr/include/ATen/ops/col_indices_native.h \
 /usr/include/ATen/ops/col_indices_copy_native.h \
 /usr/include/ATen/ops/column_stack_native.h \
 /usr/include/ATen/ops/combinations_native.h \
 /usr/include/ATen/ops/complex_native.h \
 /usr/include/ATen/ops/concat_native.h \
 /usr/include/ATen/ops/concatenate_native.h \
 /usr/include/ATen/ops/conj_native.h \
 /usr/include/ATen/ops/conj_physical_native.h \
 /usr/include/ATen/ops/constant_pad_nd_native.h \
 /usr/include/ATen/ops/contiguous_native.h \
 /usr/include/ATen/ops/conv1d_native.h \
 /usr/include/ATen/ops/conv2d_native.h \
 /usr/include/ATen/ops/conv3d_native.h \
 /usr/include/ATen/ops/conv_depthwise3d_native.h \
 /usr/include/ATen/ops/conv_tbc_native.h \
 /usr/include/ATen/ops/conv_tbc_backward_native.h \
 /usr/include/ATen/ops/conv_transpose1d_native.h \
 /usr/include/ATen/ops/conv_transpose2d_native.h \
 /usr/include/ATen/ops/conv_transpose3d_native.h \
 /usr/include/ATen/ops/convolution_native.h \
 /usr/include/ATen/ops/convolution_backward_native.h \
 /usr/include/ATen/ops/convolution_backward_overrideable_native.h \
 /usr/include/ATen/ops/convolution_overrideable_native.h \
 /usr/include/ATen/ops/copy_native.h \
 /usr/include/ATen/ops/copy_sparse_to_sparse_native.h \
 /usr/include/ATen/ops/copysign_native.h \
 /usr/include/ATen/ops/copysign_meta.h \
 /usr/include/ATen/ops/corrcoef_native.h \
 /usr/include/ATen/ops/cos_native.h /usr/include/ATen/ops/cos_meta.h \
 /usr/include/ATen/ops/cosh_native.h /usr/include/ATen/ops/cosh_meta.h \
 /usr/include/ATen/ops/cosine_embedding_loss_native.h \
 /usr/include/ATen/ops/cosine_similarity_native.h \
 /usr/include/ATen/ops/count_nonzero_native.h \
 /usr/include/ATen/ops/cov_native.h /usr/include/ATen/ops/cross_native.h \
 /usr/include/ATen/ops/cross_entropy_loss_native.h \
 /usr/include/ATen/ops/crow_indices_native.h \
 /usr/include/ATen/ops/crow_indices_copy_native.h \
 /usr/include/ATen/ops/ctc_loss_native.h \
 /usr/include/ATen/ops/cudnn_affine_grid_generator_native.h \
 /usr/include/ATen/ops/cudnn_affine_grid_generator_backward_native.h \
 /usr/include/ATen/ops/cudnn_batch_norm_native.h \
 /usr/include/ATen/ops/cudnn_batch_norm_backward_native.h \
 /usr/include/ATen/ops/cudnn_convolution_native.h \
 /usr/include/ATen/ops/cudnn_convolution_add_relu_native.h \
 /usr/include/ATen/ops/cudnn_convolution_relu_native.h \
 /usr/include/ATen/ops/cudnn_convolution_transpose_native.h \
 /usr/include/ATen/ops/cudnn_grid_sampler_native.h \
 /usr/include/ATen/ops/cudnn_grid_sampler_backward_native.h \
 /usr/include/ATen/ops/cudnn_is_acceptable_native.h \
 /usr/include/ATen/ops/cummax_native.h \
 /usr/include/ATen/ops/cummaxmin_backward_native.h \
 /usr/include/ATen/ops/cummin_native.h \
 /usr/include/ATen/ops/cumprod_native.h \
 /usr/include/ATen/ops/cumprod_meta.h \
 /usr/include/ATen/ops/cumprod_backward_native.h \
 /usr/include/ATen/ops/cumsum_native.h \
 /usr/include/ATen/ops/cumsum_meta.h \
 /usr/include/ATen/ops/cumulative_trapezoid_native.h \
 /usr/include/ATen/ops/data_native.h \
 /usr/include/ATen/ops/deg2rad_native.h \
 /usr/include/ATen/ops/dense_dim_native.h \
 /usr/include/ATen/ops/dequantize_native.h \
 /usr/include/ATen/ops/det_native.h /usr/include/ATen/ops/detach_native.h \
 /usr/include/ATen/ops/detach_copy_native.h \
 /usr/include/ATen/ops/diag_native.h \
 /usr/include/ATen/ops/diag_backward_native.h \
 /usr/include/ATen/ops/diag_embed_native.h \
 /usr/include/ATen/ops/diagflat_native.h \
 /usr/include/ATen/ops/diagonal_native.h \
 /usr/include/ATen/ops/diagonal_backward_native.h \
 /usr/include/ATen/ops/diagonal_copy_native.h \
 /usr/include/ATen/ops/diagonal_scatter_native.h \
 /usr/include/ATen/ops/diff_native.h \
 /usr/include/ATen/ops/digamma_native.h \
 /usr/include/ATen/ops/digamma_meta.h /usr/include/ATen/ops/dist_native.h \
 /usr/include/ATen/ops/div_native.h /usr/include/ATen/ops/div_meta.h \
 /usr/include/ATen/ops/divide_native.h /usr/include/ATen/ops/dot_native.h \
 /usr/include/ATen/ops/dropout_native.h \
 /usr/include/ATen/ops/dsplit_native.h \
 /usr/include/ATen/ops/dstack_native.h \
 /usr/include/ATen/ops/einsum_native.h /usr/include/ATen/ops/elu_native.h \
 /usr/include/ATen/ops/elu_meta.h \
 /usr/include/ATen/ops/elu_backward_native.h \
 /usr/include/ATen/ops/elu_backward_meta.h \
 /usr/include/ATen/ops/embedding_native.h \
 /usr/include/ATen/ops/embedding_backward_native.h \
 /usr/include/ATen/ops/embedding_bag_native.h \
 /usr/include/ATen/ops/embedding_dense_backward_native.h \
 /usr/include/ATen/ops/embedding_renorm_native.h \
 /usr/include/ATen/ops/embedding_sparse_backward_native.h \
 /usr/include/ATen/ops/empty_native.h \
 /usr/include/ATen/ops/empty_like_native.h \
 /usr/include/ATen/ops/empty_quantized_native.h \
 /usr/include/ATen/ops/empty_strided_native.h \
 /usr/include/ATen/ops/eq_native.h /usr/include/ATen/ops/eq_meta.h \
 /usr/include/ATen/ops/equal_native.h /usr/include/ATen/ops/erf_native.h \
 /usr/include/ATen/ops/erf_meta.h /usr/include/ATen/ops/erfc_native.h \
 /usr/include/ATen/ops/erfc_meta.h /usr/include/ATen/ops/erfinv_native.h \
 /usr/include/ATen/ops/erfinv_meta.h /usr/include/ATen/ops/exp_native.h \
 /usr/include/ATen/ops/exp_meta.h /usr/include/ATen/ops/exp2_native.h \
 /usr/include/ATen/ops/exp2_meta.h /usr/include/ATen/ops/expand_native.h \
 /usr/include/ATen/ops/expand_as_native.h \
 /usr/include/ATen/ops/expand_copy_native.h \
 /usr/include/ATen/ops/expm1_native.h /usr/include/ATen/ops/expm1_meta.h \
 /usr/include/ATen/ops/exponential_native.h \
 /usr/include/ATen/ops/eye_native.h \
 /usr/include/ATen/ops/fake_quantize_per_channel_affine_native.h \
 /usr/include/ATen/ops/fake_quantize_per_channel_affine_cachemask_native.h \
 /usr/include/ATen/ops/fake_quantize_per_channel_affine_cachemask_backward_native.h \
 /usr/include/ATen/ops/fake_quantize_per_tensor_affine_native.h \
 /usr/include/ATen/ops/fake_quantize_per_tensor_affine_cachemask_native.h \
 /usr/include/ATen/ops/fake_quantize_per_tensor_affine_cachemask_backward_native.h \
 /usr/include/ATen/ops/fbgemm_linear_fp16_weight_native.h \
 /usr/include/ATen/ops/fbgemm_linear_fp16_weight_fp32_activation_native.h \
 /usr/include/ATen/ops/fbgemm_linear_int8_weight_native.h \
 /usr/include/ATen/ops/fbgemm_linear_int8_weight_fp32_activation_native.h \
 /usr/include/ATen/ops/fbgemm_linear_quantize_weight_native.h \
 /usr/include/ATen/ops/fbgemm_pack_gemm_matrix_fp16_native.h \
 /usr/include/ATen/ops/fbgemm_pack_quantized_matrix_native.h \
 /usr/include/ATen/ops/feature_alpha_dropout_native.h \
 /usr/include/ATen/ops/feature_dropout_native.h \
 /usr/include/ATen/ops/fft_fft_native.h \
 /usr/include/ATen/ops/fft_fft2_native.h \
 /usr/include/ATen/ops/fft_fftfreq_native.h \
 /usr/include/ATen/ops/fft_fftn_native.h \
 /usr/include/ATen/ops/fft_fftshift_native.h \
 /usr/include/ATen/ops/fft_hfft_native.h \
 /usr/include/ATen/ops/fft_hfft2_native.h \
 /usr/include/ATen/ops/fft_hfftn_native.h \
 /usr/include/ATen/ops/fft_ifft_native.h \
 /usr/include/ATen/ops/fft_ifft2_native.h \
 /usr/include/ATen/ops/fft_ifftn_native.h \
 /usr/include/ATen/ops/fft_ifftshift_native.h \
 /usr/include/ATen/ops/fft_ihfft_native.h \
 /usr/include/ATen/ops/fft_ihfft2_native.h \
 /usr/include/ATen/ops/fft_ihfftn_native.h \
 /usr/include/ATen/ops/fft_irfft_native.h \
 /usr/include/ATen/ops/fft_irfft2_native.h \
 /usr/include/ATen/ops/fft_irfftn_native.h \
 /usr/include/ATen/ops/fft_rfft_native.h \
 /usr/include/ATen/ops/fft_rfft2_native.h \
 /usr/include/ATen/ops/fft_rfftfreq_native.h \
 /usr/include/ATen/ops/fft_rfftn_native.h \
 /usr/include/ATen/ops/fill_native.h \
 /usr/include/ATen/ops/fill_diagonal_native.h \
 /usr/include/ATen/ops/fix_native.h \
 /usr/include/ATen/ops/flatten_native.h \
 /usr/include/ATen/ops/flatten_dense_tensors_native.h \
 /usr/include/ATen/ops/flip_native.h \
 /usr/include/ATen/ops/fliplr_native.h \
 /usr/include/ATen/ops/flipud_native.h \
 /usr/include/ATen/ops/float_power_native.h \
 /usr/include/ATen/ops/floor_native.h /usr/include/ATen/ops/floor_meta.h \
 /usr/include/ATen/ops/floor_divide_native.h \
 /usr/include/ATen/ops/fmax_native.h /usr/include/ATen/ops/fmax_meta.h \
 /usr/include/ATen/ops/fmin_native.h /usr/include/ATen/ops/fmin_meta.h \
 /usr/include/ATen/ops/fmod_native.h /usr/include/ATen/ops/fmod_meta.h \
 /usr/include/ATen/ops/frac_native.h /usr/include/ATen/ops/frac_meta.h \
 /usr/include/ATen/ops/fractional_max_pool2d_native.h \
 /usr/include/ATen/ops/fractional_max_pool2d_meta.h \
 /usr/include/ATen/ops/fractional_max_pool2d_backward_native.h \
 /usr/include/ATen/ops/fractional_max_pool2d_backward_meta.h \
 /usr/include/ATen/ops/fractional_max_pool3d_native.h \
 /usr/include/ATen/ops/fractional_max_pool3d_meta.h \
 /usr/include/ATen/ops/fractional_max_pool3d_backward_native.h \
 /usr/include/ATen/ops/frexp_native.h \
 /usr/include/ATen/ops/frobenius_norm_native.h \
 /usr/include/ATen/ops/from_file_native.h \
 /usr/include/ATen/ops/full_native.h \
 /usr/include/ATen/ops/full_like_native.h \
 /usr/include/ATen/ops/fused_moving_avg_obs_fake_quant_native.h \
 /usr/include/ATen/ops/gather_native.h \
 /usr/include/ATen/ops/gather_meta.h \
 /usr/include/ATen/ops/gather_backward_native.h \
 /usr/include/ATen/ops/gcd_native.h /usr/include/ATen/ops/gcd_meta.h \
 /usr/include/ATen/ops/ge_native.h /usr/include/ATen/ops/ge_meta.h \
 /usr/include/ATen/ops/gelu_native.h /usr/include/ATen/ops/gelu_meta.h \
 /usr/include/ATen/ops/gelu_backward_native.h \
 /usr/include/ATen/ops/gelu_backward_meta.h \
 /usr/include/ATen/ops/geometric_native.h \
 /usr/include/ATen/ops/geqrf_native.h /usr/include/ATen/ops/ger_native.h \
 /usr/include/ATen/ops/glu_native.h /usr/include/ATen/ops/glu_meta.h \
 /usr/include/ATen/ops/glu_backward_native.h \
 /usr/include/ATen/ops/glu_backward_jvp_native.h \
 /usr/include/ATen/ops/glu_jvp_native.h \
 /usr/include/ATen/ops/gradient_native.h \
 /usr/include/ATen/ops/greater_native.h \
 /usr/include/ATen/ops/greater_equal_native.h \
 /usr/include/ATen/ops/grid_sampler_native.h \
 /usr/include/ATen/ops/grid_sampler_2d_native.h \
 /usr/include/ATen/ops/grid_sampler_2d_backward_native.h \
 /usr/include/ATen/ops/grid_sampler_3d_native.h \
 /usr/include/ATen/ops/grid_sampler_3d_backward_native.h \
 /usr/include/ATen/ops/group_norm_native.h \
 /usr/include/ATen/ops/gru_native.h \
 /usr/include/ATen/ops/gru_cell_native.h \
 /usr/include/ATen/ops/gt_native.h /usr/include/ATen/ops/gt_meta.h \
 /usr/include/ATen/ops/hamming_window_native.h \
 /usr/include/ATen/ops/hann_window_native.h \
 /usr/include/ATen/ops/hardshrink_native.h \
 /usr/include/ATen/ops/hardshrink_meta.h \
 /usr/include/ATen/ops/hardshrink_backward_native.h \
 /usr/include/ATen/ops/hardshrink_backward_meta.h \
 /usr/include/ATen/ops/hardsigmoid_native.h \
 /usr/include/ATen/ops/hardsigmoid_meta.h \
 /usr/include/ATen/ops/hardsigmoid_backward_native.h \
 /usr/include/ATen/ops/hardsigmoid_backward_meta.h \
 /usr/include/ATen/ops/hardswish_native.h \
 /usr/include/ATen/ops/hardswish_backward_native.h \
 /usr/include/ATen/ops/hardtanh_native.h \
 /usr/include/ATen/ops/hardtanh_backward_native.h \
 /usr/include/ATen/ops/heaviside_native.h \
 /usr/include/ATen/ops/heaviside_meta.h \
 /usr/include/ATen/ops/hinge_embedding_loss_native.h \
 /usr/include/ATen/ops/histc_native.h \
 /usr/include/ATen/ops/histogram_native.h \
 /usr/include/ATen/ops/histogramdd_native.h \
 /usr/include/ATen/ops/hsplit_native.h \
 /usr/include/ATen/ops/hspmm_native.h \
 /usr/include/ATen/ops/hstack_native.h \
 /usr/include/ATen/ops/huber_loss_native.h \
 /usr/include/ATen/ops/huber_loss_backward_native.h \
 /usr/include/ATen/ops/hypot_native.h /usr/include/ATen/ops/hypot_meta.h \
 /usr/include/ATen/ops/i0_native.h /usr/include/ATen/ops/i0_meta.h \
 /usr/include/ATen/ops/igamma_native.h \
 /usr/include/ATen/ops/igamma_meta.h \
 /usr/include/ATen/ops/igammac_native.h \
 /usr/include/ATen/ops/igammac_meta.h \
 /usr/include/ATen/ops/im2col_native.h \
 /usr/include/ATen/ops/imag_native.h /usr/include/ATen/ops/index_native.h \
 /usr/include/ATen/ops/index_meta.h \
 /usr/include/ATen/ops/index_add_native.h \
 /usr/include/ATen/ops/index_add_meta.h \
 /usr/include/ATen/ops/index_copy_native.h \
 /usr/include/ATen/ops/index_copy_meta.h \
 /usr/include/ATen/ops/index_fill_native.h \
 /usr/include/ATen/ops/index_put_native.h \
 /usr/include/ATen/ops/index_reduce_native.h \
 /usr/include/ATen/ops/index_reduce_meta.h \
 /usr/include/ATen/ops/index_select_native.h \
 /usr/include/ATen/ops/index_select_backward_native.h \
 /usr/include/ATen/ops/indices_native.h \
 /usr/include/ATen/ops/indices_copy_native.h \
 /usr/include/ATen/ops/infinitely_differentiable_gelu_backward_native.h \
 /usr/include/ATen/ops/inner_native.h \
 /usr/include/ATen/ops/instance_norm_native.h \
 /usr/include/ATen/ops/int_repr_native.h \
 /usr/include/ATen/ops/inverse_native.h \
 /usr/include/ATen/ops/is_coalesced_native.h \
 /usr/include/ATen/ops/is_complex_native.h \
 /usr/include/ATen/ops/is_conj_native.h \
 /usr/include/ATen/ops/is_distributed_native.h \
 /usr/include/ATen/ops/is_floating_point_native.h \
 /usr/include/ATen/ops/is_inference_native.h \
 /usr/include/ATen/ops/is_leaf_native.h \
 /usr/include/ATen/ops/is_neg_native.h \
 /usr/include/ATen/ops/is_nonzero_native.h \
 /usr/include/ATen/ops/is_pinned_native.h \
 /usr/include/ATen/ops/is_same_size_native.h \
 /usr/include/ATen/ops/is_set_to_native.h \
 /usr/include/ATen/ops/is_signed_native.h \
 /usr/include/ATen/ops/is_vulkan_available_native.h \
 /usr/include/ATen/ops/isclose_native.h \
 /usr/include/ATen/ops/isfinite_native.h \
 /usr/include/ATen/ops/isin_native.h /usr/include/ATen/ops/isin_meta.h \
 /usr/include/ATen/ops/isinf_native.h \
 /usr/include/ATen/ops/isnan_native.h \
 /usr/include/ATen/ops/isneginf_native.h \
 /usr/include/ATen/ops/isneginf_meta.h \
 /usr/include/ATen/ops/isposinf_native.h \
 /usr/include/ATen/ops/isposinf_meta.h \
 /usr/include/ATen/ops/isreal_native.h \
 /usr/include/ATen/ops/istft_native.h /usr/include/ATen/ops/item_native.h \
 /usr/include/ATen/ops/kaiser_window_native.h \
 /usr/include/ATen/ops/kl_div_native.h \
 /usr/include/ATen/ops/kron_native.h \
 /usr/include/ATen/ops/kthvalue_native.h \
 /usr/include/ATen/ops/l1_loss_native.h \
 /usr/include/ATen/ops/layer_norm_native.h \
 /usr/include/ATen/ops/lcm_native.h /usr/include/ATen/ops/lcm_meta.h \
 /usr/include/ATen/ops/ldexp_native.h /usr/include/ATen/ops/le_native.h \
 /usr/include/ATen/ops/le_meta.h \
 /usr/include/ATen/ops/leaky_relu_native.h \
 /usr/include/ATen/ops/leaky_relu_meta.h \
 /usr/include/ATen/ops/leaky_relu_backward_native.h \
 /usr/include/ATen/ops/leaky_relu_backward_meta.h \
 /usr/include/ATen/ops/lerp_native.h /usr/include/ATen/ops/lerp_meta.h \
 /usr/include/ATen/ops/less_native.h \
 /usr/include/ATen/ops/less_equal_native.h \
 /usr/include/ATen/ops/lgamma_native.h \
 /usr/include/ATen/ops/lgamma_meta.h /usr/include/ATen/ops/lift_native.h \
 /usr/include/ATen/ops/lift_fresh_native.h \
 /usr/include/ATen/ops/lift_fresh_copy_native.h \
 /usr/include/ATen/ops/linalg_cholesky_native.h \
 /usr/include/ATen/ops/linalg_cholesky_ex_native.h \
 /usr/include/ATen/ops/linalg_cholesky_ex_meta.h \
 /usr/include/ATen/ops/linalg_cond_native.h \
 /usr/include/ATen/ops/linalg_cross_native.h \
 /usr/include/ATen/ops/linalg_cross_meta.h \
 /usr/include/ATen/ops/linalg_det_native.h \
 /usr/include/ATen/ops/linalg_diagonal_native.h \
 /usr/include/ATen/ops/linalg_eig_native.h \
 /usr/include/ATen/ops/linalg_eigh_native.h \
 /usr/include/ATen/ops/linalg_eigvals_native.h \
 /usr/include/ATen/ops/linalg_eigvalsh_native.h \
 /usr/include/ATen/ops/linalg_householder_product_native.h \
 /usr/include/ATen/ops/linalg_inv_native.h \
 /usr/include/ATen/ops/linalg_inv_ex_native.h \
 /usr/include/ATen/ops/linalg_inv_ex_meta.h \
 /usr/include/ATen/ops/linalg_ldl_factor_native.h \
 /usr/include/ATen/ops/linalg_ldl_factor_ex_native.h \
 /usr/include/ATen/ops/linalg_ldl_factor_ex_meta.h \
 /usr/include/ATen/ops/linalg_ldl_solve_native.h \
 /usr/include/ATen/ops/linalg_ldl_solve_meta.h \
 /usr/include/ATen/ops/linalg_lstsq_native.h \
 /usr/include/ATen/ops/linalg_lu_native.h \
 /usr/include/ATen/ops/linalg_lu_meta.h \
 /usr/include/ATen/ops/linalg_lu_factor_native.h \
 /usr/include/ATen/ops/linalg_lu_factor_ex_native.h \
 /usr/include/ATen/ops/linalg_lu_factor_ex_meta.h \
 /usr/include/ATen/ops/linalg_lu_solve_native.h \
 /usr/include/ATen/ops/linalg_lu_solve_meta.h \
 /usr/include/ATen/ops/linalg_matmul_native.h \
 /usr/include/ATen/ops/linalg_matrix_exp_native.h \
 /usr/include/ATen/ops/linalg_matrix_norm_native.h \
 /usr/include/ATen/ops/linalg_matrix_power_native.h \
 /usr/include/ATen/ops/linalg_matrix_rank_native.h \
 /usr/include/ATen/ops/linalg_multi_dot_native.h \
 /usr/include/ATen/ops/linalg_norm_native.h \
 /usr/include/ATen/ops/linalg_pinv_native.h \
 /usr/include/ATen/ops/linalg_qr_native.h \
 /usr/include/ATen/ops/linalg_qr_meta.h \
 /usr/include/ATen/ops/linalg_slogdet_native.h \
 /usr/include/ATen/ops/linalg_solve_native.h \
 /usr/include/ATen/ops/linalg_solve_ex_native.h \
 /usr/include/ATen/ops/linalg_solve_triangular_native.h \
 /usr/include/ATen/ops/linalg_svd_native.h \
 /usr/include/ATen/ops/linalg_svdvals_native.h \
 /usr/include/ATen/ops/linalg_tensorinv_native.h \
 /usr/include/ATen/ops/linalg_tensorsolve_native.h \
 /usr/include/ATen/ops/linalg_vander_native.h \
 /usr/include/ATen/ops/linalg_vecdot_native.h \
 /usr/include/ATen/ops/linalg_vector_norm_native.h \
 /usr/include/ATen/ops/linalg_vector_norm_meta.h \
 /usr/include/ATen/ops/linear_native.h \
 /usr/include/ATen/ops/linear_backward_native.h \
 /usr/include/ATen/ops/linspace_native.h \
 /usr/include/ATen/ops/log_native.h /usr/include/ATen/ops/log_meta.h \
 /usr/include/ATen/ops/log10_native.h /usr/include/ATen/ops/log10_meta.h \
 /usr/include/ATen/ops/log1p_native.h /usr/include/ATen/ops/log1p_meta.h \
 /usr/include/ATen/ops/log2_native.h /usr/include/ATen/ops/log2_meta.h \
 /usr/include/ATen/ops/log_normal_native.h \
 /usr/include/ATen/ops/log_sigmoid_native.h \
 /usr/include/ATen/ops/log_sigmoid_backward_native.h \
 /usr/include/ATen/ops/log_sigmoid_forward_native.h \
 /usr/include/ATen/ops/log_softmax_native.h \
 /usr/include/ATen/ops/logaddexp_native.h \
 /usr/include/ATen/ops/logaddexp_meta.h \
 /usr/include/ATen/ops/logaddexp2_native.h \
 /usr/include/ATen/ops/logaddexp2_meta.h \
 /usr/include/ATen/ops/logcumsumexp_native.h \
 /usr/include/ATen/ops/logdet_native.h \
 /usr/include/ATen/ops/logical_and_native.h \
 /usr/include/ATen/ops/logical_not_native.h \
 /usr/include/ATen/ops/logical_or_native.h \
 /usr/include/ATen/ops/logical_xor_native.h \
 /usr/include/ATen/ops/logit_native.h \
 /usr/include/ATen/ops/logit_backward_native.h \
 /usr/include/ATen/ops/logit_backward_meta.h \
 /usr/include/ATen/ops/logspace_native.h \
 /usr/include/ATen/ops/logsumexp_native.h \
 /usr/include/ATen/ops/lshift_native.h \
 /usr/include/ATen/ops/lstm_native.h \
 /usr/include/ATen/ops/lstm_cell_native.h \
 /usr/include/ATen/ops/lstm_mps_backward_native.h \
 /usr/include/ATen/ops/lt_native.h /usr/include/ATen/ops/lt_meta.h \
 /usr/include/ATen/ops/lu_solve_native.h \
 /usr/include/ATen/ops/lu_unpack_native.h \
 /usr/include/ATen/ops/lu_unpack_meta.h /usr/include/ATen/ops/mH_native.h \
 /usr/include/ATen/ops/mT_native.h \
 /usr/include/ATen/ops/margin_ranking_loss_native.h \
 /usr/include/ATen/ops/masked_fill_native.h \
 /usr/include/ATen/ops/masked_scatter_native.h \
 /usr/include/ATen/ops/masked_select_native.h \
 /usr/include/ATen/ops/masked_select_backward_native.h \
 /usr/include/ATen/ops/matmul_native.h \
 /usr/include/ATen/ops/matmul_backward_native.h \
 /usr/include/ATen/ops/matrix_H_native.h \
 /usr/include/ATen/ops/matrix_exp_native.h \
 /usr/include/ATen/ops/matrix_exp_backward_native.h \
 /usr/include/ATen/ops/matrix_power_native.h \
 /usr/include/ATen/ops/max_native.h /usr/include/ATen/ops/max_meta.h \
 /usr/include/ATen/ops/max_pool1d_native.h \
 /usr/include/ATen/ops/max_pool1d_with_indices_native.h \
 /usr/include/ATen/ops/max_pool2d_native.h \
 /usr/include/ATen/ops/max_pool2d_with_indices_native.h \
 /usr/include/ATen/ops/max_pool2d_with_indices_meta.h \
 /usr/include/ATen/ops/max_pool2d_with_indices_backward_native.h \
 /usr/include/ATen/ops/max_pool2d_with_indices_backward_meta.h \
 /usr/include/ATen/ops/max_pool3d_native.h \
 /usr/include/ATen/ops/max_pool3d_with_indices_native.h \
 /usr/include/ATen/ops/max_pool3d_with_indices_backward_native.h \
 /usr/include/ATen/ops/max_unpool2d_native.h \
 /usr/include/ATen/ops/max_unpool3d_native.h \
 /usr/include/ATen/ops/maximum_native.h \
 /usr/include/ATen/ops/maximum_meta.h /usr/include/ATen/ops/mean_native.h \
 /usr/include/ATen/ops/mean_meta.h /usr/include/ATen/ops/median_native.h \
 /usr/include/ATen/ops/meshgrid_native.h \
 /usr/include/ATen/ops/min_native.h /usr/include/ATen/ops/min_meta.h \
 /usr/include/ATen/ops/minimum_native.h \
 /usr/include/ATen/ops/minimum_meta.h \
 /usr/include/ATen/ops/miopen_batch_norm_native.h \
 /usr/include/ATen/ops/miopen_batch_norm_backward_native.h \
 /usr/include/ATen/ops/miopen_convolution_native.h \
 /usr/include/ATen/ops/miopen_convolution_add_relu_native.h \
 /usr/include/ATen/ops/miopen_convolution_relu_native.h \
 /usr/include/ATen/ops/miopen_convolution_transpose_native.h \
 /usr/include/ATen/ops/miopen_depthwise_convolution_native.h \
 /usr/include/ATen/ops/miopen_rnn_native.h \
 /usr/include/ATen/ops/miopen_rnn_backward_native.h \
 /usr/include/ATen/ops/mish_native.h /usr/include/ATen/ops/mish_meta.h \
 /usr/include/ATen/ops/mish_backward_native.h \
 /usr/include/ATen/ops/mkldnn_adaptive_avg_pool2d_native.h \
 /usr/include/ATen/ops/mkldnn_adaptive_avg_pool2d_backward_native.h \
 /usr/include/ATen/ops/mkldnn_convolution_native.h \
 /usr/include/ATen/ops/mkldnn_linear_native.h \
 /usr/include/ATen/ops/mkldnn_linear_backward_native.h \
 /usr/include/ATen/ops/mkldnn_linear_backward_input_native.h \
 /usr/include/ATen/ops/mkldnn_linear_backward_weights_native.h \
 /usr/include/ATen/ops/mkldnn_max_pool2d_native.h \
 /usr/include/ATen/ops/mkldnn_max_pool2d_backward_native.h \
 /usr/include/ATen/ops/mkldnn_max_pool3d_native.h \
 /usr/include/ATen/ops/mkldnn_max_pool3d_backward_native.h \
 /usr/include/ATen/ops/mkldnn_reorder_conv2d_weight_native.h \
 /usr/include/ATen/ops/mkldnn_reorder_conv3d_weight_native.h \
 /usr/include/ATen/ops/mm_native.h /usr/include/ATen/ops/mm_meta.h \
 /usr/include/ATen/ops/mode_native.h \
 /usr/include/ATen/ops/moveaxis_native.h \
 /usr/include/ATen/ops/movedim_native.h \
 /usr/include/ATen/ops/mps_convolution_backward_native.h \
 /usr/include/ATen/ops/mps_convolution_transpose_backward_native.h \
 /usr/include/ATen/ops/mps_max_pool2d_backward_native.h \
 /usr/include/ATen/ops/mse_loss_native.h \
 /usr/include/ATen/ops/mse_loss_meta.h \
 /usr/include/ATen/ops/mse_loss_backward_native.h \
 /usr/include/ATen/ops/msort_native.h /usr/include/ATen/ops/mul_native.h \
 /usr/include/ATen/ops/mul_meta.h \
 /usr/include/ATen/ops/multi_margin_loss_native.h \
 /usr/include/ATen/ops/multi_margin_loss_backward_native.h \
 /usr/include/ATen/ops/multilabel_margin_loss_native.h \
 /usr/include/ATen/ops/multilabel_margin_loss_backward_native.h \
 /usr/include/ATen/ops/multilabel_margin_loss_forward_native.h \
 /usr/include/ATen/ops/multinomial_native.h \
 /usr/include/ATen/ops/multiply_native.h \
 /usr/include/ATen/ops/mv_native.h \
 /usr/include/ATen/ops/mvlgamma_native.h \
 /usr/include/ATen/ops/nan_to_num_native.h \
 /usr/include/ATen/ops/nanmean_native.h \
 /usr/include/ATen/ops/nanmedian_native.h \
 /usr/include/ATen/ops/nanquantile_native.h \
 /usr/include/ATen/ops/nansum_native.h \
 /usr/include/ATen/ops/narrow_native.h \
 /usr/include/ATen/ops/narrow_copy_native.h \
 /usr/include/ATen/ops/native_batch_norm_native.h \
 /usr/include/ATen/ops/native_batch_norm_backward_native.h \
 /usr/include/ATen/ops/native_channel_shuffle_native.h \
 /usr/include/ATen/ops/native_dropout_native.h \
 /usr/include/ATen/ops/native_dropout_backward_native.h \
 /usr/include/ATen/ops/native_group_norm_native.h \
 /usr/include/ATen/ops/native_group_norm_backward_native.h \
 /usr/include/ATen/ops/native_layer_norm_native.h \
 /usr/include/ATen/ops/native_layer_norm_backward_native.h \
 /usr/include/ATen/ops/native_norm_native.h \
 /usr/include/ATen/ops/ne_native.h /usr/include/ATen/ops/ne_meta.h \
 /usr/include/ATen/ops/neg_native.h /usr/include/ATen/ops/neg_meta.h \
 /usr/include/ATen/ops/negative_native.h \
 /usr/include/ATen/ops/nested_to_padded_tensor_native.h \
 /usr/include/ATen/ops/new_empty_native.h \
 /usr/include/ATen/ops/new_empty_strided_native.h \
 /usr/include/ATen/ops/new_full_native.h \
 /usr/include/ATen/ops/new_ones_native.h \
 /usr/include/ATen/ops/new_zeros_native.h \
 /usr/include/ATen/ops/nextafter_native.h \
 /usr/include/ATen/ops/nextafter_meta.h \
 /usr/include/ATen/ops/nll_loss_native.h \
 /usr/include/ATen/ops/nll_loss2d_native.h \
 /usr/include/ATen/ops/nll_loss2d_backward_native.h \
 /usr/include/ATen/ops/nll_loss2d_forward_native.h \
 /usr/include/ATen/ops/nll_loss_backward_native.h \
 /usr/include/ATen/ops/nll_loss_backward_meta.h \
 /usr/include/ATen/ops/nll_loss_forward_native.h \
 /usr/include/ATen/ops/nll_loss_forward_meta.h \
 /usr/include/ATen/ops/nll_loss_nd_native.h \
 /usr/include/ATen/ops/nonzero_native.h \
 /usr/include/ATen/ops/nonzero_numpy_native.h \
 /usr/include/ATen/ops/norm_native.h /usr/include/ATen/ops/norm_meta.h \
 /usr/include/ATen/ops/norm_except_dim_native.h \
 /usr/include/ATen/ops/normal_native.h \
 /usr/include/ATen/ops/not_equal_native.h \
 /usr/include/ATen/ops/nuclear_norm_native.h \
 /usr/include/ATen/ops/numpy_T_native.h \
 /usr/include/ATen/ops/one_hot_native.h \
 /usr/include/ATen/ops/ones_native.h \
 /usr/include/ATen/ops/ones_like_native.h \
 /usr/include/ATen/ops/or_native.h /usr/include/ATen/ops/orgqr_native.h \
 /usr/include/ATen/ops/ormqr_native.h \
 /usr/include/ATen/ops/outer_native.h \
 /usr/include/ATen/ops/output_nr_native.h \
 /usr/include/ATen/ops/pad_native.h \
 /usr/include/ATen/ops/pad_sequence_native.h \
 /usr/include/ATen/ops/pairwise_distance_native.h \
 /usr/include/ATen/ops/pdist_native.h \
 /usr/include/ATen/ops/permute_native.h \
 /usr/include/ATen/ops/permute_copy_native.h \
 /usr/include/ATen/ops/pin_memory_native.h \
 /usr/include/ATen/ops/pinverse_native.h \
 /usr/include/ATen/ops/pixel_shuffle_native.h \
 /usr/include/ATen/ops/pixel_unshuffle_native.h \
 /usr/include/ATen/ops/poisson_native.h \
 /usr/include/ATen/ops/poisson_nll_loss_native.h \
 /usr/include/ATen/ops/polar_native.h \
 /usr/include/ATen/ops/polygamma_native.h \
 /usr/include/ATen/ops/polygamma_meta.h \
 /usr/include/ATen/ops/positive_native.h \
 /usr/include/ATen/ops/pow_native.h /usr/include/ATen/ops/pow_meta.h \
 /usr/include/ATen/ops/prelu_native.h \
 /usr/include/ATen/ops/prelu_backward_native.h \
 /usr/include/ATen/ops/prod_native.h /usr/include/ATen/ops/prod_meta.h \
 /usr/include/ATen/ops/promote_types_native.h \
 /usr/include/ATen/ops/put_native.h \
 /usr/include/ATen/ops/q_per_channel_axis_native.h \
 /usr/include/ATen/ops/q_per_channel_scales_native.h \
 /usr/include/ATen/ops/q_per_channel_zero_points_native.h \
 /usr/include/ATen/ops/q_scale_native.h \
 /usr/include/ATen/ops/q_zero_point_native.h \
 /usr/include/ATen/ops/qr_native.h /usr/include/ATen/ops/qscheme_native.h \
 /usr/include/ATen/ops/quantile_native.h \
 /usr/include/ATen/ops/quantize_per_channel_native.h \
 /usr/include/ATen/ops/quantize_per_tensor_native.h \
 /usr/include/ATen/ops/quantize_per_tensor_dynamic_native.h \
 /usr/include/ATen/ops/quantized_batch_norm_native.h \
 /usr/include/ATen/ops/quantized_gru_cell_native.h \
 /usr/include/ATen/ops/quantized_lstm_cell_native.h \
 /usr/include/ATen/ops/quantized_max_pool1d_native.h \
 /usr/include/ATen/ops/quantized_max_pool2d_native.h \
 /usr/include/ATen/ops/quantized_rnn_relu_cell_native.h \
 /usr/include/ATen/ops/quantized_rnn_tanh_cell_native.h \
 /usr/include/ATen/ops/rad2deg_native.h \
 /usr/include/ATen/ops/rand_native.h \
 /usr/include/ATen/ops/rand_like_native.h \
 /usr/include/ATen/ops/randint_native.h \
 /usr/include/ATen/ops/randint_like_native.h \
 /usr/include/ATen/ops/randn_native.h \
 /usr/include/ATen/ops/randn_like_native.h \
 /usr/include/ATen/ops/random_native.h \
 /usr/include/ATen/ops/randperm_native.h \
 /usr/include/ATen/ops/range_native.h \
 /usr/include/ATen/ops/ravel_native.h /usr/include/ATen/ops/real_native.h \
 /usr/include/ATen/ops/reciprocal_native.h \
 /usr/include/ATen/ops/reciprocal_meta.h \
 /usr/include/ATen/ops/record_stream_native.h \
 /usr/include/ATen/ops/refine_names_native.h \
 /usr/include/ATen/ops/reflection_pad1d_native.h \
 /usr/include/ATen/ops/reflection_pad1d_meta.h \
 /usr/include/ATen/ops/reflection_pad1d_backward_native.h \
 /usr/include/ATen/ops/reflection_pad1d_backward_meta.h \
 /usr/include/ATen/ops/reflection_pad2d_native.h \
 /usr/include/ATen/ops/reflection_pad2d_backward_native.h \
 /usr/include/ATen/ops/reflection_pad3d_native.h \
 /usr/include/ATen/ops/reflection_pad3d_meta.h \
 /usr/include/ATen/ops/reflection_pad3d_backward_native.h \
 /usr/include/ATen/ops/reflection_pad3d_backward_meta.h \
 /usr/include/ATen/ops/relu_native.h /usr/include/ATen/ops/relu6_native.h \
 /usr/include/ATen/ops/remainder_native.h \
 /usr/include/ATen/ops/remainder_meta.h \
 /usr/include/ATen/ops/rename_native.h \
 /usr/include/ATen/ops/renorm_native.h \
 /usr/include/ATen/ops/renorm_meta.h \
 /usr/include/ATen/ops/repeat_native.h \
 /usr/include/ATen/ops/repeat_interleave_native.h \
 /usr/include/ATen/ops/replication_pad1d_native.h \
 /usr/include/ATen/ops/replication_pad1d_meta.h \
 /usr/include/ATen/ops/replication_pad1d_backward_native.h \
 /usr/include/ATen/ops/replication_pad1d_backward_meta.h \
 /usr/include/ATen/ops/replication_pad2d_native.h \
 /usr/include/ATen/ops/replication_pad2d_meta.h \
 /usr/include/ATen/ops/replication_pad2d_backward_native.h \
 /usr/include/ATen/ops/replication_pad3d_native.h \
 /usr/include/ATen/ops/replication_pad3d_meta.h \
 /usr/include/ATen/ops/replication_pad3d_backward_native.h \
 /usr/include/ATen/ops/requires_grad_native.h \
 /usr/include/ATen/ops/reshape_native.h \
 /usr/include/ATen/ops/reshape_as_native.h \
 /usr/include/ATen/ops/resize_native.h \
 /usr/include/ATen/ops/resize_as_native.h \
 /usr/include/ATen/ops/resize_as_sparse_native.h \
 /usr/include/ATen/ops/resolve_conj_native.h \
 /usr/include/ATen/ops/resolve_neg_native.h \
 /usr/include/ATen/ops/result_type_native.h \
 /usr/include/ATen/ops/retain_grad_native.h \
 /usr/include/ATen/ops/retains_grad_native.h \
 /usr/include/ATen/ops/rnn_relu_native.h \
 /usr/include/ATen/ops/rnn_relu_cell_native.h \
 /usr/include/ATen/ops/rnn_tanh_native.h \
 /usr/include/ATen/ops/rnn_tanh_cell_native.h \
 /usr/include/ATen/ops/roll_native.h /usr/include/ATen/ops/rot90_native.h \
 /usr/include/ATen/ops/round_native.h /usr/include/ATen/ops/round_meta.h \
 /usr/include/ATen/ops/row_indices_native.h \
 /usr/include/ATen/ops/row_indices_copy_native.h \
 /usr/include/ATen/ops/row_stack_native.h \
 /usr/include/ATen/ops/rrelu_native.h \
 /usr/include/ATen/ops/rrelu_with_noise_native.h \
 /usr/include/ATen/ops/rrelu_with_noise_backward_native.h \
 /usr/include/ATen/ops/rshift_native.h \
 /usr/include/ATen/ops/rsqrt_native.h /usr/include/ATen/ops/rsqrt_meta.h \
 /usr/include/ATen/ops/rsub_native.h \
 /usr/include/ATen/ops/scalar_tensor_native.h \
 /usr/include/ATen/ops/scatter_native.h \
 /usr/include/ATen/ops/scatter_meta.h \
 /usr/include/ATen/ops/scatter_add_native.h \
 /usr/include/ATen/ops/scatter_add_meta.h \
 /usr/include/ATen/ops/scatter_reduce_native.h \
 /usr/include/ATen/ops/scatter_reduce_meta.h \
 /usr/include/ATen/ops/searchsorted_native.h \
 /usr/include/ATen/ops/segment_reduce_native.h \
 /usr/include/ATen/ops/select_native.h \
 /usr/include/ATen/ops/select_backward_native.h \
 /usr/include/ATen/ops/select_copy_native.h \
 /usr/include/ATen/ops/select_scatter_native.h \
 /usr/include/ATen/ops/selu_native.h /usr/include/ATen/ops/set_native.h \
 /usr/include/ATen/ops/set_data_native.h \
 /usr/include/ATen/ops/sgn_native.h /usr/include/ATen/ops/sgn_meta.h \
 /usr/include/ATen/ops/sigmoid_native.h \
 /usr/include/ATen/ops/sigmoid_meta.h \
 /usr/include/ATen/ops/sigmoid_backward_native.h \
 /usr/include/ATen/ops/sigmoid_backward_meta.h \
 /usr/include/ATen/ops/sign_native.h /usr/include/ATen/ops/sign_meta.h \
 /usr/include/ATen/ops/signbit_native.h \
 /usr/include/ATen/ops/signbit_meta.h /usr/include/ATen/ops/silu_native.h \
 /usr/include/ATen/ops/silu_meta.h \
 /usr/include/ATen/ops/silu_backward_native.h \
 /usr/include/ATen/ops/silu_backward_meta.h \
 /usr/include/ATen/ops/sin_native.h /usr/include/ATen/ops/sin_meta.h \
 /usr/include/ATen/ops/sinc_native.h /usr/include/ATen/ops/sinc_meta.h \
 /usr/include/ATen/ops/sinh_native.h /usr/include/ATen/ops/sinh_meta.h \
 /usr/include/ATen/ops/size_native.h /usr/include/ATen/ops/slice_native.h \
 /usr/include/ATen/ops/slice_backward_native.h \
 /usr/include/ATen/ops/slice_copy_native.h \
 /usr/include/ATen/ops/slice_scatter_native.h \
 /usr/include/ATen/ops/slogdet_native.h \
 /usr/include/ATen/ops/slow_conv3d_native.h \
 /usr/include/ATen/ops/slow_conv3d_forward_native.h \
 /usr/include/ATen/ops/slow_conv_dilated2d_native.h \
 /usr/include/ATen/ops/slow_conv_dilated3d_native.h \
 /usr/include/ATen/ops/slow_conv_transpose2d_native.h \
 /usr/include/ATen/ops/slow_conv_transpose2d_meta.h \
 /usr/include/ATen/ops/slow_conv_transpose3d_native.h \
 /usr/include/ATen/ops/smm_native.h \
 /usr/include/ATen/ops/smooth_l1_loss_native.h \
 /usr/include/ATen/ops/smooth_l1_loss_meta.h \
 /usr/include/ATen/ops/smooth_l1_loss_backward_native.h \
 /usr/include/ATen/ops/soft_margin_loss_native.h \
 /usr/include/ATen/ops/soft_margin_loss_backward_native.h \
 /usr/include/ATen/ops/softmax_native.h \
 /usr/include/ATen/ops/softplus_native.h \
 /usr/include/ATen/ops/softplus_meta.h \
 /usr/include/ATen/ops/softplus_backward_native.h \
 /usr/include/ATen/ops/softplus_backward_meta.h \
 /usr/include/ATen/ops/softshrink_native.h \
 /usr/include/ATen/ops/softshrink_meta.h \
 /usr/include/ATen/ops/softshrink_backward_native.h \
 /usr/include/ATen/ops/softshrink_backward_meta.h \
 /usr/include/ATen/ops/sort_native.h /usr/include/ATen/ops/sort_meta.h \
 /usr/include/ATen/ops/sparse_bsc_tensor_native.h \
 /usr/include/ATen/ops/sparse_bsr_tensor_native.h \
 /usr/include/ATen/ops/sparse_compressed_tensor_native.h \
 /usr/include/ATen/ops/sparse_coo_tensor_native.h \
 /usr/include/ATen/ops/sparse_csc_tensor_native.h \
 /usr/include/ATen/ops/sparse_csr_tensor_native.h \
 /usr/include/ATen/ops/sparse_dim_native.h \
 /usr/include/ATen/ops/sparse_mask_native.h \
 /usr/include/ATen/ops/sparse_resize_native.h \
 /usr/include/ATen/ops/sparse_resize_and_clear_native.h \
 /usr/include/ATen/ops/sparse_sampled_addmm_native.h \
 /usr/include/ATen/ops/special_airy_ai_native.h \
 /usr/include/ATen/ops/special_airy_ai_meta.h \
 /usr/include/ATen/ops/special_bessel_j0_native.h \
 /usr/include/ATen/ops/special_bessel_j0_meta.h \
 /usr/include/ATen/ops/special_bessel_j1_native.h \
 /usr/include/ATen/ops/special_bessel_j1_meta.h \
 /usr/include/ATen/ops/special_bessel_y0_native.h \
 /usr/include/ATen/ops/special_bessel_y0_meta.h \
 /usr/include/ATen/ops/special_bessel_y1_native.h \
 /usr/include/ATen/ops/special_bessel_y1_meta.h \
 /usr/include/ATen/ops/special_chebyshev_polynomial_t_native.h \
 /usr/include/ATen/ops/special_chebyshev_polynomial_t_meta.h \
 /usr/include/ATen/ops/special_chebyshev_polynomial_u_native.h \
 /usr/include/ATen/ops/special_chebyshev_polynomial_u_meta.h \
 /usr/include/ATen/ops/special_chebyshev_polynomial_v_native.h \
 /usr/include/ATen/ops/special_chebyshev_polynomial_v_meta.h \
 /usr/include/ATen/ops/special_chebyshev_polynomial_w_native.h \
 /usr/include/ATen/ops/special_chebyshev_polynomial_w_meta.h \
 /usr/include/ATen/ops/special_digamma_native.h \
 /usr/include/ATen/ops/special_entr_native.h \
 /usr/include/ATen/ops/special_entr_meta.h \
 /usr/include/ATen/ops/special_erf_native.h \
 /usr/include/ATen/ops/special_erfc_native.h \
 /usr/include/ATen/ops/special_erfcx_native.h \
 /usr/include/ATen/ops/special_erfcx_meta.h \
 /usr/include/ATen/ops/special_erfinv_native.h \
 /usr/include/ATen/ops/special_exp2_native.h \
 /usr/include/ATen/ops/special_expit_native.h \
 /usr/include/ATen/ops/special_expm1_native.h \
 /usr/include/ATen/ops/special_gammainc_native.h \
 /usr/include/ATen/ops/special_gammaincc_native.h \
 /usr/include/ATen/ops/special_gammaln_native.h \
 /usr/include/ATen/ops/special_hermite_polynomial_h_native.h \
 /usr/include/ATen/ops/special_hermite_polynomial_h_meta.h \
 /usr/include/ATen/ops/special_hermite_polynomial_he_native.h \
 /usr/include/ATen/ops/special_hermite_polynomial_he_meta.h \
 /usr/include/ATen/ops/special_i0_native.h \
 /usr/include/ATen/ops/special_i0e_native.h \
 /usr/include/ATen/ops/special_i0e_meta.h \
 /usr/include/ATen/ops/special_i1_native.h \
 /usr/include/ATen/ops/special_i1_meta.h \
 /usr/include/ATen/ops/special_i1e_native.h \
 /usr/include/ATen/ops/special_i1e_meta.h \
 /usr/include/ATen/ops/special_laguerre_polynomial_l_native.h \
 /usr/include/ATen/ops/special_laguerre_polynomial_l_meta.h \
 /usr/include/ATen/ops/special_legendre_polynomial_p_native.h \
 /usr/include/ATen/ops/special_legendre_polynomial_p_meta.h \
 /usr/include/ATen/ops/special_log1p_native.h \
 /usr/include/ATen/ops/special_log_ndtr_native.h \
 /usr/include/ATen/ops/special_log_ndtr_meta.h \
 /usr/include/ATen/ops/special_log_softmax_native.h \
 /usr/include/ATen/ops/special_logit_native.h \
 /usr/include/ATen/ops/special_logsumexp_native.h \
 /usr/include/ATen/ops/special_modified_bessel_i0_native.h \
 /usr/include/ATen/ops/special_modified_bessel_i0_meta.h \
 /usr/include/ATen/ops/special_modified_bessel_i1_native.h \
 /usr/include/ATen/ops/special_modified_bessel_i1_meta.h \
 /usr/include/ATen/ops/special_modified_bessel_k0_native.h \
 /usr/include/ATen/ops/special_modified_bessel_k0_meta.h \
 /usr/include/ATen/ops/special_modified_bessel_k1_native.h \
 /usr/include/ATen/ops/special_modified_bessel_k1_meta.h \
 /usr/include/ATen/ops/special_multigammaln_native.h \
 /usr/include/ATen/ops/special_ndtr_native.h \
 /usr/include/ATen/ops/special_ndtri_native.h \
 /usr/include/ATen/ops/special_ndtri_meta.h \
 /usr/include/ATen/ops/special_polygamma_native.h \
 /usr/include/ATen/ops/special_psi_native.h \
 /usr/include/ATen/ops/special_round_native.h \
 /usr/include/ATen/ops/special_scaled_modified_bessel_k0_native.h \
 /usr/include/ATen/ops/special_scaled_modified_bessel_k0_meta.h \
 /usr/include/ATen/ops/special_scaled_modified_bessel_k1_native.h \
 /usr/include/ATen/ops/special_scaled_modified_bessel_k1_meta.h \
 /usr/include/ATen/ops/special_shifted_chebyshev_polynomial_t_native.h \
 /usr/include/ATen/ops/special_shifted_chebyshev_polynomial_t_meta.h \
 /usr/include/ATen/ops/special_shifted_chebyshev_polynomial_u_native.h \
 /usr/include/ATen/ops/special_shifted_chebyshev_polynomial_u_meta.h \
 /usr/include/ATen/ops/special_shifted_chebyshev_polynomial_v_native.h \
 /usr/include/ATen/ops/special_shifted_chebyshev_polynomial_v_meta.h \
 /usr/include/ATen/ops/special_shifted_chebyshev_polynomial_w_native.h \
 /usr/include/ATen/ops/special_shifted_chebyshev_polynomial_w_meta.h \
 /usr/include/ATen/ops/special_sinc_native.h \
 /usr/include/ATen/ops/special_softmax_native.h \
 /usr/include/ATen/ops/special_spherical_bessel_j0_native.h \
 /usr/include/ATen/ops/special_spherical_bessel_j0_meta.h \
 /usr/include/ATen/ops/special_xlog1py_native.h \
 /usr/include/ATen/ops/special_xlog1py_meta.h \
 /usr/include/ATen/ops/special_xlogy_native.h \
 /usr/include/ATen/ops/special_zeta_native.h \
 /usr/include/ATen/ops/special_zeta_meta.h \
 /usr/include/ATen/ops/split_native.h \
 /usr/include/ATen/ops/split_copy_native.h \
 /usr/include/ATen/ops/split_with_sizes_native.h \
 /usr/include/ATen/ops/split_with_sizes_copy_native.h \
 /usr/include/ATen/ops/sqrt_native.h /usr/include/ATen/ops/sqrt_meta.h \
 /usr/include/ATen/ops/square_native.h \
 /usr/include/ATen/ops/squeeze_native.h \
 /usr/include/ATen/ops/squeeze_copy_native.h \
 /usr/include/ATen/ops/sspaddmm_native.h \
 /usr/include/ATen/ops/stack_native.h /usr/include/ATen/ops/std_native.h \
 /usr/include/ATen/ops/std_mean_native.h \
 /usr/include/ATen/ops/stft_native.h \
 /usr/include/ATen/ops/stride_native.h /usr/include/ATen/ops/sub_native.h \
 /usr/include/ATen/ops/sub_meta.h /usr/include/ATen/ops/subtract_native.h \
 /usr/include/ATen/ops/sum_native.h /usr/include/ATen/ops/sum_meta.h \
 /usr/include/ATen/ops/sum_to_size_native.h \
 /usr/include/ATen/ops/svd_native.h \
 /usr/include/ATen/ops/swapaxes_native.h \
 /usr/include/ATen/ops/swapdims_native.h \
 /usr/include/ATen/ops/symeig_native.h /usr/include/ATen/ops/t_native.h \
 /usr/include/ATen/ops/t_copy_native.h \
 /usr/include/ATen/ops/take_native.h \
 /usr/include/ATen/ops/take_along_dim_native.h \
 /usr/include/ATen/ops/tan_native.h /usr/include/ATen/ops/tan_meta.h \
 /usr/include/ATen/ops/tanh_native.h /usr/include/ATen/ops/tanh_meta.h \
 /usr/include/ATen/ops/tanh_backward_native.h \
 /usr/include/ATen/ops/tanh_backward_meta.h \
 /usr/include/ATen/ops/tensor_split_native.h \
 /usr/include/ATen/ops/tensordot_native.h \
 /usr/include/ATen/ops/thnn_conv2d_native.h \
 /usr/include/ATen/ops/threshold_native.h \
 /usr/include/ATen/ops/threshold_meta.h \
 /usr/include/ATen/ops/threshold_backward_native.h \
 /usr/include/ATen/ops/threshold_backward_meta.h \
 /usr/include/ATen/ops/tile_native.h /usr/include/ATen/ops/to_native.h \
 /usr/include/ATen/ops/to_dense_native.h \
 /usr/include/ATen/ops/to_dense_backward_native.h \
 /usr/include/ATen/ops/to_mkldnn_native.h \
 /usr/include/ATen/ops/to_mkldnn_backward_native.h \
 /usr/include/ATen/ops/to_padded_tensor_native.h \
 /usr/include/ATen/ops/to_sparse_native.h \
 /usr/include/ATen/ops/to_sparse_bsc_native.h \
 /usr/include/ATen/ops/to_sparse_bsr_native.h \
 /usr/include/ATen/ops/to_sparse_csc_native.h \
 /usr/include/ATen/ops/to_sparse_csr_native.h \
 /usr/include/ATen/ops/topk_native.h /usr/include/ATen/ops/topk_meta.h \
 /usr/include/ATen/ops/trace_native.h \
 /usr/include/ATen/ops/trace_backward_native.h \
 /usr/include/ATen/ops/transpose_native.h \
 /usr/include/ATen/ops/transpose_copy_native.h \
 /usr/include/ATen/ops/trapezoid_native.h \
 /usr/include/ATen/ops/trapz_native.h \
 /usr/include/ATen/ops/triangular_solve_native.h \
 /usr/include/ATen/ops/triangular_solve_meta.h \
 /usr/include/ATen/ops/tril_native.h /usr/include/ATen/ops/tril_meta.h \
 /usr/include/ATen/ops/tril_indices_native.h \
 /usr/include/ATen/ops/triplet_margin_loss_native.h \
 /usr/include/ATen/ops/triu_native.h /usr/include/ATen/ops/triu_meta.h \
 /usr/include/ATen/ops/triu_indices_native.h \
 /usr/include/ATen/ops/true_divide_native.h \
 /usr/include/ATen/ops/trunc_native.h /usr/include/ATen/ops/trunc_meta.h \
 /usr/include/ATen/ops/type_as_native.h \
 /usr/include/ATen/ops/unbind_native.h \
 /usr/include/ATen/ops/unbind_copy_native.h \
 /usr/include/ATen/ops/unflatten_native.h \
 /usr/include/ATen/ops/unflatten_dense_tensors_native.h \
 /usr/include/ATen/ops/unfold_native.h \
 /usr/include/ATen/ops/unfold_backward_native.h \
 /usr/include/ATen/ops/unfold_copy_native.h \
 /usr/include/ATen/ops/uniform_native.h \
 /usr/include/ATen/ops/unique_consecutive_native.h \
 /usr/include/ATen/ops/unique_dim_native.h \
 /usr/include/ATen/ops/unique_dim_consecutive_native.h \
 /usr/include/ATen/ops/unsafe_chunk_native.h \
 /usr/include/ATen/ops/unsafe_split_native.h \
 /usr/include/ATen/ops/unsafe_split_with_sizes_native.h \
 /usr/include/ATen/ops/unsqueeze_native.h \
 /usr/include/ATen/ops/unsqueeze_copy_native.h \
 /usr/include/ATen/ops/upsample_bicubic2d_native.h \
 /usr/include/ATen/ops/upsample_bicubic2d_meta.h \
 /usr/include/ATen/ops/upsample_bicubic2d_backward_native.h \
 /usr/include/ATen/ops/upsample_bicubic2d_backward_meta.h \
 /usr/include/ATen/ops/upsample_bilinear2d_native.h \
 /usr/include/ATen/ops/upsample_bilinear2d_meta.h \
 /usr/include/ATen/ops/upsample_bilinear2d_backward_native.h \
 /usr/include/ATen/ops/upsample_bilinear2d_backward_meta.h \
 /usr/include/ATen/ops/upsample_linear1d_native.h \
 /usr/include/ATen/ops/upsample_linear1d_meta.h \
 /usr/include/ATen/ops/upsample_linear1d_backward_native.h \
 /usr/include/ATen/ops/upsample_linear1d_backward_meta.h \
 /usr/include/ATen/ops/upsample_nearest1d_native.h \
 /usr/include/ATen/ops/upsample_nearest1d_meta.h \
 /usr/include/ATen/ops/upsample_nearest1d_backward_native.h \
 /usr/include/ATen/ops/upsample_nearest1d_backward_meta.h \
 /usr/include/ATen/ops/upsample_nearest2d_native.h \
 /usr/include/ATen/ops/upsample_nearest2d_meta.h \
 /usr/include/ATen/ops/upsample_nearest2d_backward_native.h \
 /usr/include/ATen/ops/upsample_nearest2d_backward_meta.h \
 /usr/include/ATen/ops/upsample_nearest3d_native.h \
 /usr/include/ATen/ops/upsample_nearest3d_meta.h \
 /usr/include/ATen/ops/upsample_nearest3d_backward_native.h \
 /usr/include/ATen/ops/upsample_nearest3d_backward_meta.h \
 /usr/include/ATen/ops/upsample_trilinear3d_native.h \
 /usr/include/ATen/ops/upsample_trilinear3d_meta.h \
 /usr/include/ATen/ops/upsample_trilinear3d_backward_native.h \
 /usr/include/ATen/ops/upsample_trilinear3d_backward_meta.h \
 /usr/include/ATen/ops/value_selecting_reduction_backward_native.h \
 /usr/include/ATen/ops/values_native.h \
 /usr/include/ATen/ops/values_copy_native.h \
 /usr/include/ATen/ops/vander_native.h /usr/include/ATen/ops/var_native.h \
 /usr/include/ATen/ops/var_mean_native.h \
 /usr/include/ATen/ops/vdot_native.h /usr/include/ATen/ops/view_native.h \
 /usr/include/ATen/ops/view_as_native.h \
 /usr/include/ATen/ops/view_as_complex_native.h \
 /usr/include/ATen/ops/view_as_complex_copy_native.h \
 /usr/include/ATen/ops/view_as_real_native.h \
 /usr/include/ATen/ops/view_as_real_copy_native.h \
 /usr/include/ATen/ops/view_copy_native.h \
 /usr/include/ATen/ops/vsplit_native.h \
 /usr/include/ATen/ops/vstack_native.h \
 /usr/include/ATen/ops/where_native.h \
 /usr/include/ATen/ops/xlogy_native.h /usr/include/ATen/ops/xlogy_meta.h \
 /usr/include/ATen/ops/xor_native.h /usr/include/ATen/ops/zero_native.h \
 /usr/include/ATen/ops/zeros_native.h \
 /usr/include/ATen/ops/zeros_like_native.h \
 /usr/include/ATen/TensorOperators.h /usr/include/ATen/Version.h \
 /usr/include/ATen/core/Scalar.h /usr/include/ATen/core/UnsafeFromTH.h \
 /usr/include/torch/csrc/autograd/generated/variable_factories.h \
 /usr/include/ATen/core/grad_mode.h \
 /usr/include/torch/csrc/api/include/torch/detail/TensorDataContainer.h \
 /usr/include/torch/csrc/autograd/variable.h \
 /usr/include/torch/csrc/Export.h \
 /usr/include/torch/csrc/autograd/cpp_hook.h \
 /usr/include/torch/csrc/autograd/function_hook.h \
 /usr/include/torch/csrc/autograd/edge.h \
 /usr/include/torch/csrc/autograd/forward_grad.h \
 /usr/include/ATen/NamedTensorUtils.h /usr/include/ATen/TensorNames.h \
 /usr/include/ATen/WrapDimUtils.h \
 /usr/include/ATen/core/dispatch/Dispatcher.h \
 /usr/include/ATen/SequenceNumber.h \
 /usr/include/ATen/core/boxing/KernelFunction.h \
 /usr/include/ATen/core/boxing/BoxedKernel.h \
 /usr/include/ATen/core/boxing/OperatorKernel.h \
 /usr/include/ATen/core/boxing/BoxedKernel_impl.h \
 /usr/include/ATen/core/stack.h \
 /usr/include/ATen/core/boxing/KernelFunction_impl.h \
 /usr/include/ATen/core/boxing/impl/boxing.h \
 /usr/include/ATen/core/boxing/impl/make_boxed_from_unboxed_functor.h \
 /usr/include/ATen/core/boxing/impl/WrapFunctionIntoFunctor.h \
 /usr/include/c10/core/CompileTimeFunctionPointer.h \
 /usr/include/ATen/core/boxing/impl/WrapFunctionIntoRuntimeFunctor.h \
 /usr/include/ATen/core/dispatch/OperatorEntry.h \
 /usr/include/ATen/core/function_schema.h \
 /usr/include/ATen/core/alias_info.h \
 /usr/include/ATen/core/operator_name.h \
 /usr/include/ATen/core/dispatch/OperatorOptions.h \
 /usr/include/ATen/core/function_schema_inl.h \
 /usr/include/c++/12/iostream /usr/include/c10/util/either.h \
 /usr/include/c10/core/PyHandleCache.h \
 /usr/include/ATen/core/dispatch/DispatchKeyExtractor.h \
 /usr/include/c10/util/Bitset.h /usr/include/ATen/core/Variadic.h \
 /usr/include/ATen/core/dispatch/CppSignature.h \
 /usr/include/ATen/core/dispatch/RegistrationHandleRAII.h \
 /usr/include/ATen/core/enum_tag.h /usr/include/ATen/record_function.h \
 /usr/include/c10/util/variant.h /usr/include/c10/util/LeftRight.h \
 /usr/include/c10/util/Synchronized.h /usr/include/c++/12/shared_mutex \
 /usr/include/torch/library.h \
 /usr/include/ATen/core/op_registration/infer_schema.h \
 /usr/include/ATen/core/op_registration/op_allowlist.h \
 /usr/include/torch/csrc/jit/frontend/function_schema_parser.h \
 /usr/include/ATen/core/op_registration/op_registration.h \
 /usr/include/ATen/core/ATenOpList.h /usr/include/torch/custom_class.h \
 /usr/include/ATen/core/builtin_function.h \
 /usr/include/ATen/core/function.h /usr/include/ATen/core/class_type.h \
 /usr/include/torch/custom_class_detail.h \
 /usr/include/torch/csrc/autograd/InferenceMode.h \
 /usr/include/torch/csrc/autograd/custom_function.h \
 /usr/include/torch/csrc/autograd/function.h \
 /usr/include/torch/csrc/autograd/anomaly_mode.h \
 /usr/include/torch/csrc/autograd/grad_mode.h \
 /usr/include/torch/csrc/autograd/graph_task.h \
 /usr/include/ATen/ThreadLocalState.h /usr/include/c++/12/stack \
 /usr/include/c++/12/bits/stl_stack.h /usr/include/ATen/FuncTorchTLS.h \
 /usr/include/ATen/PythonTorchFunctionTLS.h \
 /usr/include/c10/core/SafePyObject.h \
 /usr/include/ATen/SavedTensorHooks.h \
 /usr/include/c10/core/impl/PythonDispatcherTLS.h \
 /usr/include/c10/core/impl/TorchDispatchModeTLS.h \
 /usr/include/c10/util/ThreadLocal.h \
 /usr/include/torch/csrc/autograd/input_buffer.h \
 /usr/include/torch/csrc/autograd/utils/warnings.h \
 /usr/include/torch/csrc/autograd/input_metadata.h \
 /usr/include/ATen/NestedTensorImpl.h /usr/include/ATen/MemoryOverlap.h \
 /usr/include/torch/csrc/autograd/saved_variable.h \
 /usr/include/torch/csrc/autograd/saved_variable_hooks.h \
 /usr/include/torch/csrc/utils/variadic.h \
 /usr/include/torch/csrc/jit/runtime/custom_operator.h \
 /usr/include/torch/csrc/jit/runtime/operator.h \
 /usr/include/torch/csrc/jit/runtime/operator_options.h \
 /usr/include/torch/csrc/jit/serialization/import.h \
 /usr/include/caffe2/serialize/inline_container.h \
 /usr/include/c++/12/fstream \
 /usr/include/x86_64-linux-gnu/c++/12/bits/basic_file.h \
 /usr/include/x86_64-linux-gnu/c++/12/bits/c++io.h \
 /usr/include/c++/12/bits/fstream.tcc \
 /usr/include/caffe2/serialize/istream_adapter.h \
 /usr/include/caffe2/serialize/read_adapter_interface.h \
 /usr/include/caffe2/serialize/versions.h \
 /usr/include/torch/csrc/jit/api/module.h \
 /usr/include/torch/csrc/jit/api/object.h \
 /usr/include/torch/csrc/jit/api/method.h \
 /usr/include/torch/csrc/api/include/torch/imethod.h \
 /usr/include/torch/csrc/jit/api/function_impl.h \
 /usr/include/torch/csrc/jit/ir/ir.h \
 /usr/include/torch/csrc/jit/ir/attributes.h \
 /usr/include/torch/csrc/jit/ir/graph_node_list.h \
 /usr/include/torch/csrc/jit/ir/named_value.h \
 /usr/include/torch/csrc/jit/frontend/source_range.h \
 /usr/include/torch/csrc/jit/ir/constants.h \
 /usr/include/torch/csrc/jit/ir/scope.h \
 /usr/include/torch/csrc/utils/disallow_copy.h \
 /usr/include/torch/csrc/utils/schema_info.h \
 /usr/include/ATen/core/enum_type.h \
 /usr/include/ATen/core/interned_strings.h \
 /usr/include/ATen/core/aten_interned_strings.h \
 /usr/include/torch/csrc/jit/runtime/graph_executor.h \
 /usr/include/torch/csrc/jit/python/update_graph_executor_opt.h \
 /usr/include/torch/csrc/jit/runtime/argument_spec.h \
 /usr/include/torch/csrc/jit/runtime/interpreter.h \
 /usr/include/torch/csrc/jit/runtime/variable_tensor_list.h \
 /usr/include/torch/csrc/utils/memory.h \
 /usr/include/torch/csrc/api/include/torch/ordered_dict.h \
 /usr/include/torch/csrc/jit/api/compilation_unit.h \
 /usr/include/torch/csrc/jit/frontend/name_mangler.h \
 /usr/include/torch/csrc/jit/serialization/unpickler.h \
 /usr/include/torch/csrc/jit/frontend/script_type_parser.h \
 /usr/include/torch/csrc/jit/frontend/resolver.h \
 /usr/include/torch/csrc/jit/frontend/sugared_value.h \
 /usr/include/torch/csrc/jit/frontend/error_report.h \
 /usr/include/torch/csrc/jit/frontend/tree.h \
 /usr/include/torch/csrc/jit/frontend/lexer.h \
 /usr/include/torch/csrc/jit/frontend/parser_constants.h \
 /usr/include/torch/csrc/jit/frontend/strtod.h \
 /usr/include/torch/csrc/jit/frontend/schema_matching.h \
 /usr/include/torch/csrc/jit/frontend/versioned_symbols.h \
 /usr/include/torch/csrc/jit/frontend/tree_views.h \
 /usr/include/torch/csrc/jit/serialization/pickler.h \
 /usr/include/torch/csrc/jit/serialization/pickle.h \
 /usr/include/ATen/Parallel.h /usr/include/ATen/Config.h \
 /usr/include/ATen/ParallelOpenMP.h /usr/include/ATen/Parallel-inl.h \
 /usr/include/c++/12/ext/stdio_filebuf.h \
 /usr/include/x86_64-linux-gnu/sys/stat.h \
 /usr/include/x86_64-linux-gnu/bits/stat.h \
 /usr/include/x86_64-linux-gnu/bits/struct_stat.h \
 /usr/include/x86_64-linux-gnu/bits/statx.h /usr/include/linux/stat.h \
 /usr/include/linux/types.h /usr/include/x86_64-linux-gnu/asm/types.h \
 /usr/include/asm-generic/types.h /usr/include/asm-generic/int-ll64.h \
 /usr/include/x86_64-linux-gnu/asm/bitsperlong.h \
 /usr/include/asm-generic/bitsperlong.h /usr/include/linux/posix_types.h \
 /usr/include/linux/stddef.h \
 /usr/include/x86_64-linux-gnu/asm/posix_types.h \
 /usr/include/x86_64-linux-gnu/asm/posix_types_64.h \
 /usr/include/asm-generic/posix_types.h \
 /usr/include/x86_64-linux-gnu/bits/statx-generic.h \
 /usr/include/x86_64-linux-gnu/bits/types/struct_statx_timestamp.h \
 /usr/include/x86_64-linux-gnu/bits/types/struct_statx.h \
 /usr/include/nlohmann/json.hpp /usr/include/nlohmann/adl_serializer.hpp \
 /usr/include/nlohmann/detail/abi_macros.hpp \
 /usr/include/nlohmann/detail/conversions/from_json.hpp \
 /usr/include/c++/12/forward_list /usr/include/c++/12/bits/forward_list.h \
 /usr/include/c++/12/bits/forward_list.tcc /usr/include/c++/12/valarray \
 /usr/include/c++/12/bits/valarray_array.h \
 /usr/include/c++/12/bits/valarray_array.tcc \
 /usr/include/c++/12/bits/valarray_before.h \
 /usr/include/c++/12/bits/slice_array.h \
 /usr/include/c++/12/bits/valarray_after.h \
 /usr/include/c++/12/bits/gslice.h \
 /usr/include/c++/12/bits/gslice_array.h \
 /usr/include/c++/12/bits/mask_array.h \
 /usr/include/c++/12/bits/indirect_array.h \
 /usr/include/nlohmann/detail/exceptions.hpp \
 /usr/include/nlohmann/detail/value_t.hpp \
 /usr/include/nlohmann/detail/macro_scope.hpp \
 /usr/include/nlohmann/detail/meta/detected.hpp \
 /usr/include/nlohmann/detail/meta/void_t.hpp \
 /usr/include/nlohmann/thirdparty/hedley/hedley.hpp \
 /usr/include/c++/12/version \
 /usr/include/nlohmann/detail/string_escape.hpp \
 /usr/include/nlohmann/detail/input/position_t.hpp \
 /usr/include/nlohmann/detail/meta/cpp_future.hpp \
 /usr/include/nlohmann/detail/meta/type_traits.hpp \
 /usr/include/nlohmann/detail/iterators/iterator_traits.hpp \
 /usr/include/nlohmann/detail/meta/call_std/begin.hpp \
 /usr/include/nlohmann/detail/meta/call_std/end.hpp \
 /usr/include/nlohmann/json_fwd.hpp \
 /usr/include/nlohmann/detail/string_concat.hpp \
 /usr/include/nlohmann/detail/meta/identity_tag.hpp \
 /usr/include/nlohmann/detail/meta/std_fs.hpp \
 /usr/include/c++/12/filesystem /usr/include/c++/12/bits/fs_fwd.h \
 /usr/include/c++/12/bits/fs_path.h /usr/include/c++/12/codecvt \
 /usr/include/c++/12/bits/fs_dir.h /usr/include/c++/12/bits/fs_ops.h \
 /usr/include/nlohmann/detail/conversions/to_json.hpp \
 /usr/include/nlohmann/detail/iterators/iteration_proxy.hpp \
 /usr/include/nlohmann/byte_container_with_subtype.hpp \
 /usr/include/nlohmann/detail/hash.hpp \
 /usr/include/nlohmann/detail/input/binary_reader.hpp \
 /usr/include/nlohmann/detail/input/input_adapters.hpp \
 /usr/include/nlohmann/detail/input/json_sax.hpp \
 /usr/include/nlohmann/detail/input/lexer.hpp \
 /usr/include/nlohmann/detail/meta/is_sax.hpp \
 /usr/include/nlohmann/detail/input/parser.hpp \
 /usr/include/nlohmann/detail/iterators/internal_iterator.hpp \
 /usr/include/nlohmann/detail/iterators/primitive_iterator.hpp \
 /usr/include/nlohmann/detail/iterators/iter_impl.hpp \
 /usr/include/nlohmann/detail/iterators/json_reverse_iterator.hpp \
 /usr/include/nlohmann/detail/json_pointer.hpp \
 /usr/include/nlohmann/detail/json_ref.hpp \
 /usr/include/nlohmann/detail/output/binary_writer.hpp \
 /usr/include/nlohmann/detail/output/output_adapters.hpp \
 /usr/include/nlohmann/detail/output/serializer.hpp \
 /usr/include/nlohmann/detail/conversions/to_chars.hpp \
 /usr/include/nlohmann/ordered_map.hpp /usr/include/c++/12/any \
 /usr/include/nlohmann/detail/macro_unscope.hpp \
 /usr/include/nlohmann/thirdparty/hedley/hedley_undef.hpp \
 src/backends/builtin.hpp include/warm/backend.hpp \
 include/warm/device.hpp /usr/include/c++/12/optional \
 include/warm/dense_model.hpp include/warm/error.hpp \
 /usr/include/c++/12/variant include/warm/model_repository.hpp \
 include/warm/safetensors.hpp include/warm/model_io.hpp \
 src/backends/code_helper.hpp src/storage/zip_check.hpp \
 src/backends/torch_types.hpp src/storage/located_file.hpp \
 src/storage/file.hpp include/warm/units.hpp
