//! `imagecodecs_jpegxl`, the Zarr v2 compressor UMI stores its pictures with (Python
//! `imagecodecs.numcodecs.Jpegxl`), decoded by jxl-oxide and registered with zarrs as a
//! codec plugin: zarrs finds codecs by id in its registry, so an array naming this one
//! opens like any other. Decoding only; Reel never writes Zarr.

use std::borrow::Cow;
use std::sync::Arc;

use zarrs::array::codec::api::{
    BytesToBytesCodecTraits, Codec, CodecError, CodecMetadataOptions, CodecOptions, CodecPluginV2,
    CodecPluginV3, CodecTraits, CodecTraitsV2, CodecTraitsV3, PartialDecoderCapability,
    PartialEncoderCapability, RecommendedConcurrency,
};
use zarrs::array::{ArrayBytesRaw, BytesRepresentation};
use zarrs::metadata::Configuration;
use zarrs::metadata::v2::MetadataV2;
use zarrs::metadata::v3::MetadataV3;
use zarrs::plugin::{PluginCreateError, ZarrVersion};

/// The `imagecodecs_jpegxl` codec: a chunk's bytes are one JPEG XL picture (codestream or
/// container) whose pixels, interleaved 8-bit samples, are the chunk's decoded bytes.
#[derive(Debug, Clone)]
pub(super) struct JpegXlCodec {
    configuration: Configuration,
}

zarrs::plugin::impl_extension_aliases!(JpegXlCodec,
    v3: "imagecodecs_jpegxl", [],
    v2: "imagecodecs_jpegxl", []
);

inventory::submit! {
    CodecPluginV3::new::<JpegXlCodec>()
}

inventory::submit! {
    CodecPluginV2::new::<JpegXlCodec>()
}

impl CodecTraitsV3 for JpegXlCodec {
    fn create(metadata: &MetadataV3) -> Result<Codec, PluginCreateError> {
        let configuration = metadata
            .to_configuration::<Configuration>()
            .unwrap_or_default();
        Ok(Codec::BytesToBytes(Arc::new(Self { configuration })))
    }
}

impl CodecTraitsV2 for JpegXlCodec {
    fn create(metadata: &MetadataV2) -> Result<Codec, PluginCreateError> {
        let configuration = metadata.configuration().clone();
        Ok(Codec::BytesToBytes(Arc::new(Self { configuration })))
    }
}

impl CodecTraits for JpegXlCodec {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn configuration(
        &self,
        _version: ZarrVersion,
        _options: &CodecMetadataOptions,
    ) -> Option<Configuration> {
        Some(self.configuration.clone())
    }

    fn partial_decoder_capability(&self) -> PartialDecoderCapability {
        PartialDecoderCapability {
            partial_read: false,
            partial_decode: false,
        }
    }

    fn partial_encoder_capability(&self) -> PartialEncoderCapability {
        PartialEncoderCapability {
            partial_encode: false,
        }
    }
}

impl BytesToBytesCodecTraits for JpegXlCodec {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn BytesToBytesCodecTraits> {
        self as Arc<dyn BytesToBytesCodecTraits>
    }

    fn recommended_concurrency(
        &self,
        _decoded_representation: &BytesRepresentation,
    ) -> Result<RecommendedConcurrency, CodecError> {
        Ok(RecommendedConcurrency::new_maximum(1))
    }

    fn encoded_representation(
        &self,
        _decoded_representation: &BytesRepresentation,
    ) -> BytesRepresentation {
        BytesRepresentation::UnboundedSize
    }

    fn encode<'a>(
        &self,
        _decoded_value: ArrayBytesRaw<'a>,
        _options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        Err(CodecError::Other(
            "imagecodecs_jpegxl: Reel decodes JPEG XL, it does not encode it".into(),
        ))
    }

    fn decode<'a>(
        &self,
        encoded_value: ArrayBytesRaw<'a>,
        decoded_representation: &BytesRepresentation,
        _options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        let pixels = decode(&encoded_value).map_err(CodecError::Other)?;
        if let Some(size) = decoded_representation.size()
            && size != pixels.len() as u64
        {
            return Err(CodecError::Other(format!(
                "imagecodecs_jpegxl: the picture decodes to {} bytes, the chunk holds {size}",
                pixels.len()
            )));
        }
        Ok(Cow::Owned(pixels))
    }
}

/// The first frame of a JPEG XL picture as interleaved 8-bit samples, rows top to bottom.
pub(super) fn decode(bytes: &[u8]) -> Result<Vec<u8>, String> {
    fn fail(e: impl std::fmt::Display) -> String {
        format!("imagecodecs_jpegxl: the JPEG XL picture does not decode: {e}")
    }
    let image = jxl_oxide::JxlImage::builder()
        .read(std::io::Cursor::new(bytes))
        .map_err(fail)?;
    let render = image.render_frame(0).map_err(fail)?;
    let mut stream = render.stream();
    let samples = stream.width() as usize * stream.height() as usize * stream.channels() as usize;
    let mut pixels = vec![0u8; samples];
    let written = stream.write_to_buffer(&mut pixels);
    if written != samples {
        return Err(format!(
            "imagecodecs_jpegxl: a truncated JPEG XL picture ({written} of {samples} samples)"
        ));
    }
    Ok(pixels)
}
